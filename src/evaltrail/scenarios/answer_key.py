"""Multiple choice given as {text, label} options plus an answerKey label: ARC, CommonsenseQA, OpenBookQA.

The answer key names a label, not a position: most ARC rows are lettered A-E, but some
(NYSEDREGENTS) are numbered 1-4, and a few have 3 or 5 options, so the gold is found by label.
Every option whose text equals the keyed option's is flagged correct: CommonsenseQA repeats an
option in a few rows, and two identical continuations cannot be told apart by any model.
"""

from __future__ import annotations

from pathlib import Path

from ..config import ScenarioConfig
from ..schema import Reference, make_instance
from . import register
from .arrow_splits import load_splits


def keyed_references(choices: dict, answer_key: str) -> list[Reference]:
    texts, labels = choices["text"], choices["label"]
    if len(texts) != len(labels) or len(texts) < 2:
        raise ValueError(f"{len(texts)} option texts for {len(labels)} labels")
    gold = texts[labels.index(answer_key)]  # ValueError (malformed row) if the key is no label
    return [Reference(t, t == gold) for t in texts]


def _loader(question: str, meta: tuple[str, ...]):
    def load(cfg: ScenarioConfig, raw: Path) -> dict[str, list]:
        def make(split: str, row: dict):
            if not row[question].strip():
                raise ValueError(f"empty {question}")
            return make_instance(
                split, row[question], keyed_references(row["choices"], row["answerKey"]), {k: row[k] for k in meta}
            )

        return load_splits(cfg, raw, make)

    return load


load_arc = _loader("question", ("id",))
load_commonsense_qa = _loader("question", ("id", "question_concept"))
load_openbookqa = _loader("question_stem", ("id",))

register("arc_easy")(load_arc)
register("arc_challenge")(load_arc)
register("commonsense_qa")(load_commonsense_qa)
register("openbookqa")(load_openbookqa)
