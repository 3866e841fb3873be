"""Social IQa: a short situation, a question about it, three answers; label "1".."3".

The input is "{context} {question}" joined by one space (every context ends its sentence with
"."), the OLMES / lm-evaluation-harness way of making one question of the pair.
"""

from __future__ import annotations

from pathlib import Path

from ..config import ScenarioConfig
from ..schema import Reference, make_instance
from . import register
from .arrow_splits import load_splits


def _make(split: str, row: dict):
    gold = ("1", "2", "3").index(row["label"])
    answers = [row["answerA"], row["answerB"], row["answerC"]]
    text = f"{row['context'].strip()} {row['question'].strip()}"
    return make_instance(split, text, [Reference(a, i == gold) for i, a in enumerate(answers)])


@register("social_iqa")
def load(cfg: ScenarioConfig, raw: Path) -> dict[str, list]:
    return load_splits(cfg, raw, _make)
