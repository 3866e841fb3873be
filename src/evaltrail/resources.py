"""Shared pinned word lists (params `resources`): which a scenario needs, where they land, loading.

Perturbations and bias metrics read word lists that belong to no one scenario. Each is pinned
once in conf (`resources.<name>`) and fetched with every scenario that needs it, into
`data/raw/<scenario>/resources/<file>`, so it is listed in that scenario's SOURCES.json and a
trace from any number reaches it like any other raw file.
"""

from __future__ import annotations

from pathlib import Path

from .config import ScenarioConfig
from .errors import EvaltrailError

DIR = "resources"

# What each perturbation word list (perturbations.registry Entry.needs) is read from.
PERTURBATION_NEEDS = {"misspellings": "misspellings", "dialect": "dialect", "names": "bias_word_lists"}


def needed(cfg: ScenarioConfig) -> list[str]:
    """Names of the resources this scenario's perturbations and metrics read, sorted."""
    from .metrics import get_metric
    from .perturbations.registry import REGISTRY

    names = set()
    for p in cfg.perturbations:
        if p not in REGISTRY:
            raise EvaltrailError(f"params.yaml: scenario.{cfg.name}.perturbations: unknown {p!r}; "
                                 f"valid: {', '.join(sorted(REGISTRY))}")
        names.update(PERTURBATION_NEEDS[n] for n in REGISTRY[p].needs)
    for m in cfg.metrics:
        metric = get_metric(m)
        if metric.kind == "corpus":  # a corpus group names the word lists its inputs read
            names.update(metric.fn.needs)
    return sorted(names)


def sources(pins: dict, cfg: ScenarioConfig) -> list[dict]:
    """The pinned source specs (`pins`: params `resources`) of the resources this scenario needs,
    with `file` under resources/."""
    out = []
    for name in needed(cfg):
        if name not in pins:
            raise EvaltrailError(f"params.yaml: resources.{name}: missing; scenario.{cfg.name} needs it "
                                 f"(pin it in conf/config.yaml)")
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

    return Resources.from_files(**{res: path(pins, raw_dir, res) for res in needed(cfg)
                                   if res in PERTURBATION_NEEDS.values()})
