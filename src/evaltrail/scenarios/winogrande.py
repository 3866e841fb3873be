"""WinoGrande: a sentence with one "_" blank and two fillers; answer "1"/"2" names the right one.

The input keeps the "_": the separate adapter's partial scoring (`partial: true`) puts each
option in the blank and scores the text after it, as the WinoGrande authors and OLMES do.
"""

from __future__ import annotations

from pathlib import Path

from ..config import ScenarioConfig
from ..schema import Reference, make_instance
from . import register
from .arrow_splits import load_splits


def _make(split: str, row: dict):
    if row["sentence"].count("_") != 1:
        raise ValueError(f"{row['sentence'].count('_')} blanks ('_') in the sentence, expected 1")
    gold = ("1", "2").index(row["answer"])  # ValueError on the hidden test split's empty answer
    options = [row["option1"], row["option2"]]
    return make_instance(split, row["sentence"], [Reference(o, i == gold) for i, o in enumerate(options)])


@register("winogrande")
def load(cfg: ScenarioConfig, raw: Path) -> dict[str, list]:
    return load_splits(cfg, raw, _make)
