"""Metric registry: `get_metric(name)` returns a callable Metric; `list_metrics()` names them all.

Per-instance kinds (a value per (instance, trial); a scenario's number is their mean):
- ``reference``: ``(gold: str, pred: str) -> float`` on generated text; an instance scores the
  max over its gold references.
- ``choice``: over the multiple-choice loglikelihood requests of all instances (a frame with
  columns choice_index, logprob, continuation, correct) -> value per instance.
- ``lm``: over rolling-loglikelihood rows (one per document) -> per-document value.
- ``text``: ``(texts: list[str]) -> list[float]``, reference-free, on generated text (toxicity).
- ``usage``: over the requests of all instances -> value per instance (efficiency).
Corpus kind (one value for the whole set, bootstrap CI over instances):
- ``corpus``: `fn` is a `Corpus` group (evaltrail.metrics.corpus) computing several named metrics
  from per-instance arrays at once (calibration, bias, BBQ).

Robustness and fairness are not metrics of their own: every per-instance metric gets worst-case
companions ``<metric>/<perturbation>``, ``<metric>/robustness`` and ``<metric>/fairness`` when
the scenario has variants (see evaltrail.metrics.worst_case).
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
    higher_is_better: bool | None = True
    """Direction, for win rates and significance marks; None: no better direction (token counts)."""
    family: str = "accuracy"
    """HELM metric family: accuracy | calibration | bias | toxicity | efficiency (robustness and
    fairness are worst-case views of these)."""

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


_REGISTRY: dict[str, Metric] = {}


PER_INSTANCE = ("reference", "choice", "lm", "text", "usage")
FAMILIES = ("accuracy", "calibration", "robustness", "fairness", "bias", "toxicity", "efficiency")


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


from . import choice, corpus, efficiency, language_modeling, reference, toxicity  # noqa: E402,F401  (modules register on import)
