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
    return {split: _distinct_subjects(rows) for split, rows in out.items()}


def _distinct_subjects(instances: list) -> list:
    """The test split repeats 78 clinical_knowledge questions in college_medicine word for word. The
    prompt names the subject, so each copy is its own instance: a copy outside the alphabetically
    first of its subjects hashes its subject too (the first keeps the bare content hash, so the ids
    of questions asked once never moved). A row repeated within one subject stays one instance."""
    subjects: dict[str, set[str]] = {}
    for inst in instances:
        subjects.setdefault(inst.instance_id, set()).add(inst.metadata["subject"])
    return [
        inst
        if inst.metadata["subject"] == min(subjects[inst.instance_id])
        else make_instance(
            inst.split, inst.input, list(inst.references), inst.metadata, {"subject": inst.metadata["subject"]}
        )
        for inst in instances
    ]
