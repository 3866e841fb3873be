"""Seeded choice of evaluation instances and in-context examples, by content hash only.

Order in the raw file never matters: instances are ranked by sha256(seed, instance_id), so adding
or reordering raw rows changes the chosen set only by the rows actually added.
"""

from __future__ import annotations

import random
from collections import defaultdict

from ..config import RunConfig, ScenarioConfig
from ..errors import EvaltrailError
from ..hashing import stable_id
from ..schema import Instance


def dedupe(instances: list[Instance]) -> list[Instance]:
    """Drop exact duplicates (same content, same id), keeping the first."""
    seen: dict[str, Instance] = {}
    for inst in instances:
        seen.setdefault(inst.instance_id, inst)
    return list(seen.values())


def group_of(inst: Instance, key: str | None) -> str:
    return "" if key is None else str(inst.metadata.get(key, ""))


def sample(instances: list[Instance], k: int | None, seed: int, group_key: str | None = None) -> list[Instance]:
    """Up to k instances per group, ranked by seeded hash; returned sorted by (group, instance_id)."""
    groups: dict[str, list[Instance]] = defaultdict(list)
    for inst in dedupe(instances):
        groups[group_of(inst, group_key)].append(inst)
    chosen: list[Instance] = []
    for g in sorted(groups):
        ranked = sorted(groups[g], key=lambda i: stable_id([seed, i.instance_id]))
        chosen += sorted(ranked[:k] if k and k > 0 else ranked, key=lambda i: i.instance_id)
    return chosen


def eval_instances(cfg: ScenarioConfig, run: RunConfig, splits: dict[str, list[Instance]]) -> list[Instance]:
    if cfg.eval_split not in splits:
        raise EvaltrailError(f"params.yaml: scenario.{cfg.name}.eval_split: {cfg.eval_split!r} not loaded; "
                             f"available: {', '.join(sorted(splits))}")
    k = cfg.max_eval_instances if cfg.max_eval_instances is not None else run.max_eval_instances
    return sample(splits[cfg.eval_split], k, run.seed, cfg.sample_group)


def few_shot(cfg: ScenarioConfig, run: RunConfig, splits: dict[str, list[Instance]],
             inst: Instance, trial: int) -> list[Instance]:
    """cfg.num_shots examples from the train split (same group), never `inst` itself.

    The draw depends only on (seed, trial, group), so every instance of a group shares one
    example set per trial, as HELM does; the instance itself is skipped if drawn."""
    if cfg.num_shots <= 0:
        return []
    if not cfg.train_split or cfg.train_split not in splits:
        raise EvaltrailError(f"params.yaml: scenario.{cfg.name}.train_split: needed for num_shots > 0")
    group = group_of(inst, cfg.sample_group)
    pool = sorted((p for p in dedupe(splits[cfg.train_split]) if group_of(p, cfg.sample_group) == group),
                  key=lambda p: p.instance_id)
    rng = random.Random(stable_id([run.seed, trial, group]))
    drawn = rng.sample(pool, min(len(pool), cfg.num_shots + 1))
    return [p for p in drawn if p.instance_id != inst.instance_id][: cfg.num_shots]
