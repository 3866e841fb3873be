"""GSM8K (Cobbe et al. 2021): grade-school math word problems, solved by a chain of thought.

The reference is the whole worked solution, so 5-shot examples teach the model to reason and
then conclude in a fixed phrase (Wei et al. 2022, as HELM): the "<<48/2=24>>" calculator
annotations are removed (they are tooling, not prose), the solution lines are joined by spaces
(a blank line would hit the "\\n\\n" stop sequence), and the final "#### N" line becomes
"The answer is N." final_number_exact_match compares the last number of prediction and gold.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..config import ScenarioConfig
from ..schema import Reference, make_instance
from . import register
from .rows import convert, jsonl_rows

ANNOTATION = re.compile(r"<<[^<>]*>>")
FINAL = "#### "


def solution_text(answer: str) -> tuple[str, str]:
    """GSM8K answer field -> (chain-of-thought reference, final answer as written)."""
    *steps, last = answer.strip().split("\n")
    if not last.startswith(FINAL) or FINAL.strip() in "\n".join(steps) or not last[len(FINAL) :].strip():
        raise ValueError(f"answer does not end in one '{FINAL}N' line: {answer[-80:]!r}")
    final = last[len(FINAL) :].strip()
    prose = " ".join(s.strip() for s in ANNOTATION.sub("", "\n".join(steps)).split("\n") if s.strip())
    if "<<" in prose or ">>" in prose:
        raise ValueError(f"unbalanced calculator annotation in {answer[:80]!r}")
    return f"{prose} The answer is {final}.".lstrip(), final


@register("gsm8k")
def load(cfg: ScenarioConfig, raw: Path) -> dict[str, list]:
    splits = [cfg.eval_split] + ([cfg.train_split] if cfg.train_split else [])
    out = {}
    for split in splits:
        path = raw / f"{split}.jsonl"

        def make(row: dict, split=split):
            question = row["question"].strip()
            if not question:
                raise ValueError("empty question")
            reference, final = solution_text(row["answer"])
            return make_instance(split, question, [Reference(reference, True)], {"final_answer": final})

        out[split] = convert(cfg, path, jsonl_rows(path), make)
    return out
