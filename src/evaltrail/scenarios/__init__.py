"""Scenario registry: a scenario's name is its conf file, stage suffix and results path.

A loader turns the verified raw files of a scenario into Instances, per split. A scenario over a
plain JSONL, CSV or Parquet file is one conf naming a generic loader (`loader: multiple_choice` or
`generation`, evaltrail.scenarios.generic); any other needs a small module registering a loader
under the scenario's name. A variant of a scenario (another method, other options) names that
scenario's loader.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..config import ScenarioConfig
from ..errors import EvaltrailError
from ..schema import Instance

Loader = Callable[[ScenarioConfig, Path], dict[str, list[Instance]]]


@dataclass(frozen=True)
class ScenarioLoader:
    name: str
    """Registry key = scenario name."""
    load: Loader
    """(config, raw dir) -> {split: instances}."""
    options: frozenset[str] = field(default_factory=frozenset)
    """Loader-specific config keys it accepts."""
    select_sources: Callable[[ScenarioConfig], list[dict]] | None = None
    """Which of the pinned sources this configuration needs (default: all)."""
    generic: bool = False
    """Chosen by a conf's `loader:` for any scenario, rather than serving the scenario of its name."""

    def sources(self, cfg: ScenarioConfig) -> list[dict]:
        return self.select_sources(cfg) if self.select_sources else list(cfg.sources)

    def check(self, cfg: ScenarioConfig) -> None:
        unknown = sorted(set(cfg.options) - self.options)
        if unknown:
            raise EvaltrailError(
                f"params.yaml: scenario.{cfg.name}.{unknown[0]}: unknown key for "
                f"the {self.name} loader; accepted extra keys: {', '.join(sorted(self.options)) or '(none)'}"
            )
        if cfg.loader is None and self.generic:
            raise EvaltrailError(
                f"params.yaml: scenario.{cfg.name}: {self.name!r} names a generic loader; "
                f"choose it with `loader: {self.name}` under a scenario name of your own"
            )


REGISTRY: dict[str, ScenarioLoader] = {}


def register(name: str, options: tuple[str, ...] = (), select_sources=None, generic: bool = False):
    def deco(fn: Loader) -> Loader:
        REGISTRY[name] = ScenarioLoader(name, fn, frozenset(options), select_sources, generic)
        return fn

    return deco


def get_scenario(name: str) -> ScenarioLoader:
    if name not in REGISTRY:
        raise EvaltrailError(
            f"unknown scenario {name!r}: no loader is registered; valid: {', '.join(sorted(REGISTRY))}"
        )
    return REGISTRY[name]


def loader_of(cfg: ScenarioConfig) -> ScenarioLoader:
    """The loader a scenario's conf chooses (`loader:`: a generic one, or another scenario's, for a
    variant of it such as BoolQ scored by loglikelihood), else the one registered under its name."""
    if cfg.loader is None:
        return get_scenario(cfg.name)
    if cfg.loader not in REGISTRY:
        generic = sorted(k for k, v in REGISTRY.items() if v.generic)
        raise EvaltrailError(
            f"params.yaml: scenario.{cfg.name}.loader: unknown loader {cfg.loader!r}; the generic ones: "
            f"{', '.join(generic)} (or a scenario's name to reuse its loader)"
        )
    return REGISTRY[cfg.loader]


def pinned_files(cfg: ScenarioConfig, pins: dict, metric_lists) -> list[dict]:
    """Every file the scenario fetches into data/raw/<name>/: its loader's sources and the pinned
    word lists (`pins`, params.yaml's `resources`) that its perturbations and its metrics
    (`metric_lists`: evaltrail.metrics.word_lists of them) read."""
    from .. import resources

    return loader_of(cfg).sources(cfg) + resources.sources(pins, cfg, metric_lists)


def _discover() -> None:
    """Import every module of this package: loader modules register themselves on import."""
    import importlib
    import pkgutil

    for mod in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        importlib.import_module(f"{__name__}.{mod}")


_discover()
