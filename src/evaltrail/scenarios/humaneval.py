"""HumanEval (Chen et al. 2021): complete a Python function from its signature and docstring.

Each problem's prompt is the code up to the function body; the model continues it greedily, cut
at the Codex paper's stop sequences (a new top-level `def`, `class`, `if`, `print` or comment).
The reference is the canonical body; metadata carries the problem's unit test (`check`) and the
function's name, which `pass_at_1` runs against the completion in the code sandbox.
"""

from __future__ import annotations

from pathlib import Path

from ..config import ScenarioConfig
from ..schema import Reference, make_instance
from . import register
from .rows import convert, jsonl_rows

FILE = "HumanEval.jsonl.gz"


def _make(split: str, row: dict):
    for key in ("task_id", "prompt", "canonical_solution", "test", "entry_point"):
        if not isinstance(row[key], str) or not row[key].strip():
            raise ValueError(f"{key} must be non-empty text")
    if f"def {row['entry_point']}" not in row["prompt"] or "def check(" not in row["test"]:
        raise ValueError(f"{row['task_id']}: the prompt defines no {row['entry_point']} or the test no check()")
    meta = {"task_id": row["task_id"], "entry_point": row["entry_point"], "test": row["test"]}
    return make_instance(split, row["prompt"], [Reference(row["canonical_solution"], True)], meta)


@register("humaneval")
def load(cfg: ScenarioConfig, raw: Path) -> dict[str, list]:
    path = raw / FILE
    return {cfg.eval_split: convert(cfg, path, jsonl_rows(path), lambda row: _make(cfg.eval_split, row))}
