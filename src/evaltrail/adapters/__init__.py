"""Adapters turn instances into model requests (HELM's adaptation methods).

Each adapter module exposes `build(cfg, run, splits) -> [(Instance, Request)]` and, for methods
whose output is text, `golds(references) -> [str]`: the outputs that count as correct.
"""

from __future__ import annotations

from types import ModuleType

from ..errors import EvaltrailError
from . import generation, language_modeling, multiple_choice_joint, multiple_choice_separate

ADAPTERS: dict[str, ModuleType] = {
    "generation": generation,
    "multiple_choice_joint": multiple_choice_joint,
    "multiple_choice_separate": multiple_choice_separate,
    "language_modeling": language_modeling,
}


def get_adapter(method: str, where: str = "params.yaml") -> ModuleType:
    if method not in ADAPTERS:
        raise EvaltrailError(f"{where}: unknown method {method!r}; valid: {', '.join(sorted(ADAPTERS))}")
    return ADAPTERS[method]
