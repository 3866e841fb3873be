"""Seeded choice of evaluation instances and in-context examples, by content hash only.

Order in the raw file never matters: instances are ranked by sha256(seed, instance_id), so adding
or reordering raw rows changes the chosen set only by the rows actually added.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Iterable

from ..config import RunConfig, ScenarioConfig
from ..errors import EvaltrailError
from ..hashing import stable_id
from ..perturbations import Resources, perturb_all
from ..schema import Instance, Request, make_request


def dedupe(instances: list[Instance]) -> list[Instance]:
    """Drop exact duplicates (same content, same id), keeping the first."""
    seen: dict[str, Instance] = {}
    for inst in instances:
        seen.setdefault(inst.instance_id, inst)
    return list(seen.values())


def repeated_rows(splits: dict[str, list[Instance]]) -> dict[str, int]:
    """Per split, the rows that repeat an earlier row's content word for word: one instance (ids are
    content hashes), evaluated once. Only splits that have any."""
    counts = {s: len(v) - len({i.instance_id for i in v}) for s, v in sorted(splits.items())}
    return {s: n for s, n in counts.items() if n}


def group_of(inst: Instance, key: str | None) -> str:
    return "" if key is None else str(inst.metadata.get(key, ""))


def sample(instances: list[Instance], k: int | None, seed: int, group_key: str | None = None) -> list[Instance]:
    """Up to k original instances per group, ranked by seeded hash, each followed by the variants
    (contrast sets) that name it as their original; sorted by (group, instance_id).

    Only originals are ranked, so k counts what HELM counts and a variant is evaluated exactly
    when its original is (a worst case needs both)."""
    groups: dict[str, list[Instance]] = defaultdict(list)
    variants: dict[str, list[Instance]] = defaultdict(list)
    for inst in dedupe(instances):
        if inst.perturbation is None:
            groups[group_of(inst, group_key)].append(inst)
        else:
            variants[str(inst.metadata.get("original_id"))].append(inst)
    chosen: list[Instance] = []
    for g in sorted(groups):
        ranked = sorted(groups[g], key=lambda i: stable_id([seed, i.instance_id]))
        picked = ranked[:k] if k and k > 0 else ranked
        chosen += sorted(picked + [v for i in picked for v in variants[i.instance_id]], key=lambda i: i.instance_id)
    return chosen


def eval_instances(
    cfg: ScenarioConfig, run: RunConfig, splits: dict[str, list[Instance]], resources: Resources | None = None
) -> list[Instance]:
    """The sampled instances of the eval split, then one variant of each original per configured
    perturbation (an unchanged variant is dropped, as HELM does: its worst case is the original)."""
    if cfg.eval_split not in splits:
        raise EvaltrailError(
            f"params.yaml: scenario.{cfg.name}.eval_split: {cfg.eval_split!r} not loaded; "
            f"available: {', '.join(sorted(splits))}"
        )
    k = cfg.max_eval_instances if cfg.max_eval_instances is not None else run.max_eval_instances
    chosen = sample(splits[cfg.eval_split], k, run.seed, cfg.sample_group)
    originals = [i for i in chosen if i.perturbation is None]
    for name in cfg.perturbations:
        chosen += perturb_all(originals, name, resources)
    return chosen


def _label(inst: Instance) -> str | None:
    """The class label of a worked example: its single correct reference's text."""
    golds = inst.gold_indices
    return inst.references[golds[0]].text if len(golds) == 1 else None


def _draw(pool: list[Instance], k: int, rng: random.Random) -> list[Instance]:
    """k examples; class-balanced (round robin over labels in seeded order) when the pool is
    labelled, i.e. each example has one gold answer drawn from a small repeating label set
    (yes/no, positive/negative); a plain seeded sample otherwise (e.g. MMLU's distinct answers)."""
    labels = [_label(p) for p in pool]
    distinct = sorted(set(labels)) if None not in labels else []
    if not (2 <= len(distinct) <= 10 and len(distinct) * 2 <= len(pool)):
        return rng.sample(pool, min(len(pool), k))
    by_label = {lab: [p for p, lp in zip(pool, labels) if lp == lab] for lab in distinct}
    rng.shuffle(distinct)
    for lab in distinct:
        rng.shuffle(by_label[lab])
    drawn: list[Instance] = []
    while len(drawn) < min(k, len(pool)):
        for lab in distinct:
            if by_label[lab] and len(drawn) < k:
                drawn.append(by_label[lab].pop())
    return drawn


_SHOTS: dict[tuple, tuple[list[Instance], list[Instance]]] = {}
"""Memo of drawn example sets: (train list, draw) keyed by the list's id and the draw's inputs."""


def few_shot(
    cfg: ScenarioConfig, run: RunConfig, splits: dict[str, list[Instance]], inst: Instance, trial: int
) -> list[Instance]:
    """cfg.num_shots examples from the train split (same group), never `inst` itself.

    The draw depends only on (seed, trial, group), so every instance of a group shares one
    example set per trial, as HELM does; one spare is drawn, used only where the instance
    itself was drawn (when train and eval split are the same)."""
    if cfg.num_shots <= 0:
        return []
    if not cfg.train_split or cfg.train_split not in splits:
        raise EvaltrailError(f"params.yaml: scenario.{cfg.name}.train_split: needed for num_shots > 0")
    group, train = group_of(inst, cfg.sample_group), splits[cfg.train_split]
    key = (id(train), cfg.sample_group, group, trial, run.seed, cfg.num_shots)
    if key not in _SHOTS or _SHOTS[key][0] is not train:  # an id can be reused once a list is freed
        pool = sorted((p for p in dedupe(train) if group_of(p, cfg.sample_group) == group), key=lambda p: p.instance_id)
        _SHOTS[key] = (train, _draw(pool, cfg.num_shots + 1, random.Random(stable_id([run.seed, trial, group]))))
    own = {inst.instance_id, inst.metadata.get("original_id")}  # a variant's original is itself too
    return [p for p in _SHOTS[key][1] if p.instance_id not in own][: cfg.num_shots]


def per_trial(
    cfg: ScenarioConfig,
    run: RunConfig,
    splits: dict[str, list[Instance]],
    resources,
    requests: Callable[[ScenarioConfig, Instance, list[Instance], int], Iterable[Request]],
) -> list[tuple[Instance, Request]]:
    """The adapters' one build loop: for every evaluation instance and few-shot trial, in that
    order, `requests(cfg, instance, shots, trial)`, each paired with its instance."""
    pairs = []
    for inst in eval_instances(cfg, run, splits, resources):
        for trial in range(cfg.num_train_trials):
            shots = few_shot(cfg, run, splits, inst, trial)
            pairs += [
                (inst, r) for req in requests(cfg, inst, shots, trial) for r in answer_samples(req, cfg, run.seed)
            ]
    return pairs


def answer_samples(req: Request, cfg: ScenarioConfig, seed: int) -> list[Request]:
    """`req` itself, or with num_samples > 1 one sampled copy per sample as its trial, each drawn
    with its own seed: a content hash of the run's seed, the instance and the sample index, so a
    sample's answer never depends on which other samples or instances are run."""
    if cfg.num_samples == 1:
        return [req]
    return [
        make_request(
            req.instance_id,
            k,
            req.method,
            req.prompt,
            max_tokens=req.max_tokens,
            stop=req.stop,
            few_shot_ids=req.few_shot_ids,
            temperature=cfg.temperature,
            seed=int(stable_id([seed, req.instance_id, k]), 16) >> 1,  # 63 bits: an int64 column
        )
        for k in range(cfg.num_samples)
    ]
