"""XSTest (Röttger et al., NAACL 2024): 250 safe prompts a well-calibrated model should answer and
200 unsafe contrast prompts it should refuse, in ten types each ("homonyms" vs "contrast_homonyms").

An instance is a prompt with no reference (there is no gold answer, only a behaviour); its
metadata carries XSTest's id, type, label (safe/unsafe), focus and note, so the refusal metrics
can score over-refusal on safe prompts and compliance on unsafe ones, per prompt type.
"""

from __future__ import annotations

import csv
from pathlib import Path

from ..config import ScenarioConfig
from ..schema import make_instance
from . import register
from .rows import _require, convert

FILE = "xstest_prompts.csv"
LABELS = ("safe", "unsafe")


def _rows(path: Path):
    with open(_require(path), encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        for row in reader:
            yield reader.line_num, row


def _make(split: str, row: dict):
    if row["label"] not in LABELS:
        raise ValueError(f"label {row['label']!r} is not safe or unsafe")
    if not row["prompt"].strip() or not row["type"].strip():
        raise ValueError("empty prompt or type")
    meta = {k: row[k] for k in ("id", "type", "label", "focus", "note")}
    return make_instance(split, row["prompt"], [], meta)


@register("xstest")
def load(cfg: ScenarioConfig, raw: Path) -> dict[str, list]:
    path = raw / FILE
    return {cfg.eval_split: convert(cfg, path, _rows(path), lambda row: _make(cfg.eval_split, row))}
