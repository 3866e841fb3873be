"""Reference metrics on generated text: (gold, pred) -> float."""

from __future__ import annotations

from . import register


@register("exact_match", "reference")
def exact_match(gold: str, pred: str) -> float:
    """1 when the stripped prediction equals the stripped gold (HELM's exact_match)."""
    return float(gold.strip() == pred.strip())
