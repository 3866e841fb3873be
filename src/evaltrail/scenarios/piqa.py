"""PIQA: a physical goal and two candidate solutions; label 0/1 picks the right one."""

from __future__ import annotations

from pathlib import Path

from ..config import ScenarioConfig
from ..schema import Reference, make_instance
from . import register
from .arrow_splits import load_splits


def _make(split: str, row: dict):
    if row["label"] not in (0, 1):  # the hidden test split has label -1: not scoreable
        raise ValueError(f"label {row['label']!r} is not 0 or 1")
    sols = [row["sol1"], row["sol2"]]
    return make_instance(split, row["goal"], [Reference(s, i == row["label"]) for i, s in enumerate(sols)])


@register("piqa")
def load(cfg: ScenarioConfig, raw: Path) -> dict[str, list]:
    return load_splits(cfg, raw, _make)
