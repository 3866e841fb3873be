"""Text budgets for long inputs: cut at a word boundary and say so in the metadata."""

from __future__ import annotations

import re

from ..config import ScenarioConfig
from ..errors import EvaltrailError


def char_limit(cfg: ScenarioConfig, key: str) -> int | None:
    """A positive character budget from the scenario options (the conf sets it), or None."""
    if key not in cfg.options:
        raise EvaltrailError(f"params.yaml: scenario.{cfg.name}.{key}: missing (a character budget, or null)")
    value = cfg.options[key]
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
        raise EvaltrailError(
            f"params.yaml: scenario.{cfg.name}.{key}: {value!r} is not a positive integer (or null for no truncation)"
        )
    return value


def truncate(text: str, limit: int | None) -> str:
    """At most `limit` characters, cut back to the last whitespace so no word is split."""
    if limit is None or len(text) <= limit:
        return text
    m = re.match(r"(.*\S)\s", text[: limit + 1], re.DOTALL)
    return m.group(1) if m else text[:limit]


def cut_metadata(original: str, kept: str, key: str) -> dict:
    return {f"{key}_chars": len(original), f"{key}_truncated": len(kept) < len(original)}


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'A-Z0-9])")


def sentences(text: str) -> list[str]:
    """Sentences by end punctuation followed by a capital, digit or quote (deterministic, no model)."""
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]
