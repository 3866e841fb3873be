"""MMLU: 57 subjects of 4-way multiple choice; one Arrow file per subject and split."""

from __future__ import annotations

from pathlib import Path

from ..config import ScenarioConfig
from ..schema import Reference, make_instance
from . import register
from .arrow import read_rows
from .subsets import chosen, selector


def _subject_of(source: dict) -> str:
    return source["file"].split("/", 1)[0]


def _subjects(cfg: ScenarioConfig) -> list[str]:
    return chosen(cfg, "subjects", _subject_of, "subject")


_select = selector("subjects", _subject_of, "subject")


@register("mmlu", options=("subjects",), select_sources=_select)
def load(cfg: ScenarioConfig, raw: Path) -> dict[str, list]:
    splits = [cfg.eval_split] + ([cfg.train_split] if cfg.train_split else [])
    out: dict[str, list] = {s: [] for s in splits}
    for subject in _subjects(cfg):
        for split in splits:
            for row in read_rows(raw / subject / f"{split}.arrow"):
                refs = [Reference(c, i == row["answer"]) for i, c in enumerate(row["choices"])]
                meta = {"subject": subject, "subject_name": subject.replace("_", " ")}
                out[split].append(make_instance(split, row["question"], refs, meta))
    return out
