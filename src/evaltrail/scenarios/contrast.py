"""Contrast sets (Gardner et al. 2020): human edits of test instances, evaluated beside them.

A contrast instance lives in the eval split with perturbation="contrast_set" and names its
original in metadata["original_id"], so a metric can pair them (consistency: both right).
The `contrast_set` option (default true) turns them off; its source is then not fetched.
"""

from __future__ import annotations

import dataclasses

from ..config import ScenarioConfig
from ..errors import EvaltrailError
from ..schema import Instance

PERTURBATION = "contrast_set"
OPTION = "contrast_set"


def enabled(cfg: ScenarioConfig) -> bool:
    value = cfg.options.get(OPTION, True)
    if not isinstance(value, bool):
        raise EvaltrailError(f"params.yaml: scenario.{cfg.name}.{OPTION}: {value!r} is not true or false")
    return value


def sources(cfg: ScenarioConfig, contrast_files: set[str]) -> list[dict]:
    """The pinned sources this config needs: all, or all but the contrast files."""
    return [s for s in cfg.sources if enabled(cfg) or s["file"] not in contrast_files]


def mark(inst: Instance, original: Instance) -> Instance:
    """`inst` as the contrast version of `original` (ids stay content hashes, so a contrast
    instance identical to its original would collide with it: callers skip those)."""
    return dataclasses.replace(
        inst, perturbation=PERTURBATION, metadata={**inst.metadata, "original_id": original.instance_id}
    )
