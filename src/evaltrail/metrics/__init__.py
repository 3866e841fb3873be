"""Metric registry: `get_metric(name)` returns a callable Metric; `list_metrics()` names them all.

Two kinds:
- ``reference``: ``(gold: str, pred: str) -> float`` on generated text; an instance scores the
  max over its gold references.
- ``choice``: over one instance's separate multiple-choice requests (a frame with columns
  choice_index, logprob, continuation, correct) -> float; applied to all instances at once.
- ``lm``: over rolling-loglikelihood rows (one per document) -> per-document value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..errors import EvaltrailError


@dataclass(frozen=True)
class Metric:
    name: str
    """Registry key, used in scenario configs and results."""
    kind: str
    """reference | choice | lm."""
    fn: Callable
    """The computation; see the module docstring for each kind's signature."""
    higher_is_better: bool = True
    """Direction, for win rates and significance marks."""

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


_REGISTRY: dict[str, Metric] = {}


def register(name: str, kind: str, higher_is_better: bool = True):
    def deco(fn):
        _REGISTRY[name] = Metric(name, kind, fn, higher_is_better)
        return fn
    return deco


def get_metric(name: str) -> Metric:
    if name not in _REGISTRY:
        raise EvaltrailError(f"unknown metric {name!r}; valid: {', '.join(list_metrics())}")
    return _REGISTRY[name]


def list_metrics() -> list[str]:
    return sorted(_REGISTRY)


from . import choice, language_modeling, reference  # noqa: E402,F401  (modules register on import)
