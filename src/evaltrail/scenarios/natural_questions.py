"""NaturalQuestions, closed book (NQ-open, Lee et al. 2019): answer a Google query from memory.

NQ-open questions are lower-case search queries without a question mark; each is turned into a
question (first letter capitalized, "?" appended when missing) so it reads like the
"Question: ...?" prompts the model saw in training. Every annotated answer string is a gold.
"""

from __future__ import annotations

from pathlib import Path

from ..config import ScenarioConfig
from ..schema import Reference, make_instance
from . import register
from .arrow import arrow_rows
from .rows import convert


def as_question(query: str) -> str:
    """'when was x' -> 'When was x?'; only the first letter changes (names keep their case)."""
    q = query.strip()
    if not q:
        raise ValueError("empty question")
    q = q[0].upper() + q[1:]
    return q if q.endswith("?") else q + "?"


@register("natural_questions")
def load(cfg: ScenarioConfig, raw: Path) -> dict[str, list]:
    out = {}
    for split in dict.fromkeys([cfg.eval_split, cfg.train_split or cfg.eval_split]):
        path = raw / f"{split}.arrow"

        def make(row: dict, split=split):
            answers = [a.strip() for a in row["answer"] if a.strip()]
            if not answers:
                raise ValueError("no answer")
            refs = [Reference(a, True) for a in dict.fromkeys(answers)]
            return make_instance(split, as_question(row["question"]), refs, {"query": row["question"]})

        out[split] = convert(cfg, path, arrow_rows(path), make)
    return out
