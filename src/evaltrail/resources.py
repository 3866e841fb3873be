"""Shared pinned word lists (params `resources`): which a scenario needs, where they land, loading.

Perturbations and bias metrics read word lists that belong to no one scenario. Each is pinned
once in conf (`resources.<name>`) and fetched with every scenario that needs it, into
`data/raw/<scenario>/resources/<file>`, so it is listed in that scenario's SOURCES.json and a
trace from any number reaches it like any other raw file.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from .config import ScenarioConfig
from .errors import EvaltrailError

DIR = "resources"

# What each perturbation word list (perturbations.registry Entry.needs) is read from.
PERTURBATION_NEEDS = {"misspellings": "misspellings", "dialect": "dialect", "names": "bias_word_lists"}


def needed(cfg: ScenarioConfig, metric_lists: Iterable[str]) -> list[str]:
    """Names of the resources this scenario's perturbations read, and `metric_lists` (what its
    metrics read: evaltrail.metrics.word_lists, passed in so that stages which never score do not
    depend on metric code), sorted."""
    from .perturbations.registry import REGISTRY

    names = set(metric_lists)
    for p in cfg.perturbations:
        if p not in REGISTRY:
            raise EvaltrailError(
                f"params.yaml: scenario.{cfg.name}.perturbations: unknown {p!r}; valid: {', '.join(sorted(REGISTRY))}"
            )
        names.update(PERTURBATION_NEEDS[n] for n in REGISTRY[p].needs)
    return sorted(names)


def sources(pins: dict, cfg: ScenarioConfig, metric_lists: Iterable[str]) -> list[dict]:
    """The pinned source specs (`pins`: params `resources`) of the resources this scenario needs,
    with `file` under resources/."""
    out = []
    for name in needed(cfg, metric_lists):
        if name not in pins:
            raise EvaltrailError(
                f"params.yaml: resources.{name}: missing; scenario.{cfg.name} needs it (pin it in conf/config.yaml)"
            )
        spec = dict(pins[name])
        spec["file"] = f"{DIR}/{spec.get('file', name)}"
        out.append(spec)
    return out


def path(pins: dict, raw_dir: Path, name: str) -> Path:
    """Where resource `name` was fetched for the scenario whose raw dir is `raw_dir`."""
    return Path(raw_dir) / DIR / pins[name].get("file", name)


def load_perturbation_resources(pins: dict, cfg: ScenarioConfig, raw_dir: Path):
    """The perturbations.Resources holding the lists this scenario's perturbations need."""
    from .perturbations import Resources

    return Resources.from_files(
        **{res: path(pins, raw_dir, res) for res in needed(cfg, ()) if res in PERTURBATION_NEEDS.values()}
    )
