"""The metric registry and the corpus-group mechanism, which every family module registers into.

Families live one a module (accuracy, calibration, worst_case for robustness/fairness, bias,
toxicity, efficiency); this module knows none of them, so nothing imports in a circle.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from ..errors import EvaltrailError

GROUP = ["instance_id", "trial"]
"""The key of a per-instance value: an instance's trial (few-shot draw)."""


@dataclass(frozen=True)
class Metric:
    name: str
    """Registry key, used in scenario configs and results."""
    kind: str
    """reference | choice | lm | text | usage | code | generated (per instance) or corpus."""
    fn: Callable
    """The computation; see evaltrail.metrics for each kind's signature."""
    higher_is_better: bool | None = True
    """Direction, for win rates and significance marks; None: no better direction (token counts)."""
    family: str = "accuracy"
    """HELM metric family: accuracy | calibration | bias | toxicity | efficiency | safety (HELM
    Safety's refusal behaviour); robustness and fairness are worst-case views of these."""

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


_REGISTRY: dict[str, Metric] = {}


PER_INSTANCE = ("reference", "choice", "lm", "text", "usage", "code", "generated")
FAMILIES = ("accuracy", "calibration", "robustness", "fairness", "bias", "toxicity", "efficiency", "safety")


def register(name: str, kind: str, higher_is_better: bool | None = True, family: str = "accuracy"):
    def deco(fn):
        _REGISTRY[name] = Metric(name, kind, fn, higher_is_better, family)
        return fn

    return deco


def _unknown(name: str) -> str:
    from ..costs import MEASURED

    if name in MEASURED:  # HELM scores these; here they are measurements of the machine
        return f"{name!r} is a measurement of the machine, recorded by infer in results/costs/, not a metric; remove it"
    return f"unknown metric {name!r}; valid: {', '.join(list_metrics())}"


def get_metric(name: str) -> Metric:
    if name not in _REGISTRY:
        raise EvaltrailError(_unknown(name))
    return _REGISTRY[name]


def check_metrics(names: list[str], where: str) -> None:
    """Fail naming the config key on the first metric name that is not registered."""
    for name in names:
        if name not in _REGISTRY:
            raise EvaltrailError(f"{where}: {_unknown(name)}")


def word_lists(names: list[str]) -> set[str]:
    """The pinned resources (params `resources` keys) that metrics `names` read: a corpus group
    names the word lists its inputs need."""
    return {n for name in names if (m := get_metric(name)).kind == "corpus" for n in m.fn.needs}


def list_metrics() -> list[str]:
    return sorted(_REGISTRY)


Arrays = dict[str, np.ndarray]


@dataclass(frozen=True)
class Context:
    """What corpus inputs may read besides the frame."""

    word_lists: Path | None = None
    """HELM's bias_word_lists.py as fetched for this scenario (bias metrics)."""


@dataclass(frozen=True)
class Corpus:
    name: str
    """Group name."""
    metrics: tuple[str, ...]
    """The metric names `compute` returns."""
    inputs: Callable[[pd.DataFrame, Context], Arrays | None]
    """Scored frame of the original instances -> per-instance arrays (None: nothing to score)."""
    compute: Callable[[Arrays], dict[str, float | None]]
    """Arrays (possibly a resample) -> metric values; None where undefined."""
    needs: tuple[str, ...] = ()
    """Pinned resources (params `resources`) the inputs read, fetched with the scenario."""


GROUPS: dict[str, Corpus] = {}


def corpus(name: str, metrics: dict[str, tuple[bool | None, str]], inputs, needs: tuple[str, ...] = ()):
    """Register a Corpus group: `metrics` maps each name to (higher_is_better, family)."""

    def deco(compute):
        group = Corpus(name, tuple(metrics), inputs, compute, needs)
        GROUPS[name] = group
        for m, (hib, family) in metrics.items():
            register(m, "corpus", hib, family)(group)
        return compute

    return deco


def wide(frame: pd.DataFrame, column: str) -> np.ndarray:
    """A (instance, trial) column as an [instances, trials] array, instances in id order."""
    return frame[column].unstack("trial").sort_index().to_numpy(dtype=np.float64)
