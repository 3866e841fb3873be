"""HellaSwag: choose the ending of a scene; text cleaned as lm-evaluation-harness does."""

from __future__ import annotations

import re
from pathlib import Path

from ..config import ScenarioConfig
from ..schema import Reference, make_instance
from . import register
from .arrow import read_rows


def clean(text: str) -> str:
    """WikiHow artefacts out: ' [title]' becomes a sentence break, other [tags] go, spaces fold."""
    text = text.strip().replace(" [title]", ". ")
    text = re.sub(r"\[.*?\]", "", text)
    return text.replace("  ", " ")


@register("hellaswag")
def load(cfg: ScenarioConfig, raw: Path) -> dict[str, list]:
    out = []
    for row in read_rows(raw / f"{cfg.eval_split}.arrow"):
        ctx = row["ctx_a"] + " " + row["ctx_b"].capitalize()
        query = clean(row["activity_label"] + ": " + ctx)
        gold = int(row["label"])
        refs = [Reference(clean(e), i == gold) for i, e in enumerate(row["endings"])]
        meta = {"activity_label": row["activity_label"], "source_id": row["source_id"], "split_type": row["split_type"]}
        out.append(make_instance(cfg.eval_split, query, refs, meta))
    return {cfg.eval_split: out}
