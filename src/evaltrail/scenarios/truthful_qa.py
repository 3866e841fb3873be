"""TruthfulQA MC1 (Lin et al. 2022): pick the one true answer among imitative falsehoods.

Upstream data/mc_task.json lists each question's mc1_targets with the correct option first, so
a model could score by always answering "A". The options are shuffled per question, the same
way on every run and machine: random.Random(seed).shuffle(options) with
seed = int(sha256(question as UTF-8).hexdigest(), 16), options in upstream order before the
shuffle. Empty option strings (17 questions carry one, labelled false) are dropped.
There is one split; it is called validation, as in HELM and lm-evaluation-harness. The file is
one JSON list, so a malformed question is reported as file:<position in the list, from 1>.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

from ..config import ScenarioConfig
from ..errors import EvaltrailError
from ..schema import Reference, make_instance
from . import register
from .rows import convert

SOURCE_FILE = "mc_task.json"


def shuffle_seed(question: str) -> int:
    return int(hashlib.sha256(question.encode("utf-8")).hexdigest(), 16)


def shuffled_options(question: str, targets: dict) -> list[Reference]:
    """mc1_targets {option: 1|0} -> references in the deterministic shuffled order."""
    options = [Reference(text.strip(), bool(label)) for text, label in targets.items() if text.strip()]
    if sum(r.correct for r in options) != 1 or len(options) < 2:
        raise ValueError(f"mc1_targets needs one true option among >= 2, got {targets!r}")
    random.Random(shuffle_seed(question)).shuffle(options)
    return options


def _entries(path: Path):
    if not path.is_file():
        raise EvaltrailError(f"{path}: missing raw file; run `dvc repro` so fetch materializes it")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise EvaltrailError(f"{path}: not JSON ({exc}); re-fetch it") from None
    if not isinstance(data, list):
        raise EvaltrailError(f"{path}: expected a JSON list of questions")
    return enumerate(data, 1)


@register("truthful_qa")
def load(cfg: ScenarioConfig, raw: Path) -> dict[str, list]:
    path = raw / SOURCE_FILE

    def make(entry: dict):
        question = entry["question"].strip()
        if not question:
            raise ValueError("empty question")
        return make_instance(cfg.eval_split, question, shuffled_options(question, entry["mc1_targets"]))

    return {cfg.eval_split: convert(cfg, path, _entries(path), make)}
