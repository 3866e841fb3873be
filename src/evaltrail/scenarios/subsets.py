"""Scenarios whose sources split by a key (MMLU subject, BBQ category): a list option chooses
which keys to evaluate, and only those keys' files are fetched."""

from __future__ import annotations

from typing import Callable

from ..config import ScenarioConfig
from ..errors import EvaltrailError


def chosen(cfg: ScenarioConfig, option: str, key_of: Callable[[dict], str], noun: str) -> list[str]:
    """The keys named by `cfg.options[option]`, each checked against the pinned sources; "all"
    names every key the sources have."""
    available = sorted({key_of(s) for s in cfg.sources})
    wanted = cfg.options.get(option) or []
    if wanted == "all":
        return available
    bad = [k for k in wanted if k not in available]
    if bad or not wanted:
        problem = f"unknown {noun} {bad[0]!r}" if bad else "empty"
        raise EvaltrailError(f"params.yaml: scenario.{cfg.name}.{option}: {problem}; valid: {', '.join(available)}")
    return list(wanted)


def selector(option: str, key_of: Callable[[dict], str], noun: str) -> Callable[[ScenarioConfig], list[dict]]:
    """`select_sources` for the registry: the sources whose key was chosen."""

    def select(cfg: ScenarioConfig) -> list[dict]:
        wanted = set(chosen(cfg, option, key_of, noun))
        return [s for s in cfg.sources if key_of(s) in wanted]

    return select
