"""Seeded sampling by content hash: row order and additions never reshuffle the chosen set."""

from __future__ import annotations

import dataclasses
import random

from evaltrail.adapters.sampling import dedupe, few_shot, sample
from evaltrail.config import RunConfig, ScenarioConfig
from evaltrail.schema import Reference, make_instance


def insts(n, group=None, split="test"):
    return [
        make_instance(
            split, f"question {i}", [Reference("yes", True), Reference("no", False)], {"g": group or f"g{i % 3}"}
        )
        for i in range(n)
    ]


def test_sample_ignores_row_order():
    pool = insts(50)
    shuffled = pool[:]
    random.Random(1).shuffle(shuffled)
    assert [i.instance_id for i in sample(pool, 10, 0)] == [i.instance_id for i in sample(shuffled, 10, 0)]


def test_adding_rows_keeps_chosen_unless_displaced():
    pool = insts(50)
    before = {i.instance_id for i in sample(pool, 10, 0)}
    after = {i.instance_id for i in sample(pool + insts(60)[50:], 10, 0)}
    added = {i.instance_id for i in insts(60)[50:]}
    assert after - before <= added  # only new rows can enter


def test_seed_changes_choice_and_groups_cap_each():
    pool = insts(60)
    assert {i.instance_id for i in sample(pool, 10, 0)} != {i.instance_id for i in sample(pool, 10, 1)}
    chosen = sample(pool, 4, 0, group_key="g")
    assert len(chosen) == 12
    assert sorted({i.metadata["g"] for i in chosen}) == ["g0", "g1", "g2"]


def test_dedupe_and_no_cap():
    pool = insts(5)
    assert len(dedupe(pool + pool)) == 5
    assert len(sample(pool + pool, None, 0)) == 5


def _cfg(**kw):
    base = dict(
        name="t",
        method="multiple_choice_joint",
        eval_split="test",
        metrics=["exact_match"],
        main_metric="exact_match",
        sources=[],
        num_shots=3,
        train_split="test",
        sample_group=None,
    )
    return ScenarioConfig(**{**base, **kw})


RUN = RunConfig(
    seed=0, max_eval_instances=10, bootstrap_samples=10, scenarios=[], models=[], scenario={}, model={}, mlflow={}
)


def test_few_shot_never_uses_the_instance_itself():
    pool = insts(4, group="same")
    splits = {"test": pool}
    for inst in pool:
        shots = few_shot(_cfg(), RUN, splits, inst, trial=0)
        assert len(shots) == 3 and inst.instance_id not in {s.instance_id for s in shots}


def test_few_shot_is_seeded_by_trial():
    pool = insts(20, group="same")
    splits = {"test": pool}
    target = insts(1, group="same", split="other")[0]
    a = [s.instance_id for s in few_shot(_cfg(), RUN, splits, target, 0)]
    assert a == [s.instance_id for s in few_shot(_cfg(), RUN, splits, target, 0)]
    assert a != [s.instance_id for s in few_shot(_cfg(), RUN, splits, target, 1)]


def labelled(n_yes, n_no, split="train"):
    return [make_instance(split, f"yes {i}", [Reference("Yes", True)]) for i in range(n_yes)] + [
        make_instance(split, f"no {i}", [Reference("No", True)]) for i in range(n_no)
    ]


def test_few_shot_is_class_balanced_where_labels_exist():
    cfg = _cfg(num_shots=4, train_split="train")
    splits = {"train": labelled(90, 10)}  # skewed 9:1, still 2 + 2 drawn
    target = insts(1, split="test")[0]
    for trial in range(5):
        shots = few_shot(cfg, RUN, splits, target, trial)
        golds = sorted(s.references[0].text for s in shots)
        assert golds == ["No", "No", "Yes", "Yes"]


def test_unlabelled_pool_is_a_plain_seeded_sample():
    cfg = _cfg(num_shots=3, train_split="train")
    pool = [make_instance("train", f"q{i}", [Reference(f"answer {i}", True)]) for i in range(30)]
    target = insts(1, split="test")[0]
    a = few_shot(cfg, RUN, {"train": pool}, target, 0)
    assert len({s.references[0].text for s in a}) == 3
    assert [s.instance_id for s in a] == [s.instance_id for s in few_shot(cfg, RUN, {"train": list(pool)}, target, 0)]


# --- variants: perturbations and contrast sets ---------------------------------------------------


def _gen_cfg(**kw):
    return ScenarioConfig(
        name="t",
        method="generation",
        eval_split="test",
        metrics=["exact_match"],
        main_metric="exact_match",
        sources=[],
        **kw,
    )


RUN4 = RunConfig(
    seed=0, max_eval_instances=4, bootstrap_samples=0, scenarios=[], models=[], scenario={}, model={}, mlflow={}
)


def test_perturbations_add_one_variant_per_changed_original():
    from evaltrail.adapters.sampling import eval_instances

    pool = [make_instance("test", f"Question {i}: IS IT {i}?", [Reference("yes", True)], {}) for i in range(10)]
    pool.append(make_instance("test", "already lower", [Reference("no", True)], {}))
    chosen = eval_instances(
        _gen_cfg(perturbations=["lowercase"]), dataclasses.replace(RUN4, max_eval_instances=None), {"test": pool}
    )
    originals = [i for i in chosen if i.perturbation is None]
    variants = [i for i in chosen if i.perturbation == "lowercase"]
    assert len(originals) == 11 and len(variants) == 10  # "already lower" is unchanged: no variant, as HELM
    by_id = {i.instance_id: i for i in originals}
    for v in variants:
        assert v.input == by_id[v.metadata["original_id"]].input.lower() and v.instance_id not in by_id
    again = eval_instances(
        _gen_cfg(perturbations=["lowercase"]),
        dataclasses.replace(RUN4, max_eval_instances=None),
        {"test": list(reversed(pool))},
    )
    assert sorted(i.instance_id for i in again) == sorted(i.instance_id for i in chosen)


def test_contrast_variants_follow_their_original_and_do_not_count_towards_k():
    pool = insts(20)
    contrast = [
        dataclasses.replace(
            make_instance("test", o.input + " (edited)", list(o.references), {}),
            perturbation="contrast_set",
            metadata={"original_id": o.instance_id},
        )
        for o in pool
    ]
    chosen = sample(pool + contrast, 5, 0)
    originals = {i.instance_id for i in chosen if i.perturbation is None}
    assert len(originals) == 5 and len(chosen) == 10
    assert {i.metadata["original_id"] for i in chosen if i.perturbation} == originals


def test_few_shot_never_shows_a_variant_its_own_original():
    train = insts(8)
    cfg = dataclasses.replace(_gen_cfg(), num_shots=7, train_split="test")
    variant = dataclasses.replace(
        train[0],
        instance_id="v0",
        perturbation="typos",
        metadata={**train[0].metadata, "original_id": train[0].instance_id},
    )
    shots = few_shot(cfg, RUN4, {"test": train}, variant, 0)
    assert train[0].instance_id not in {s.instance_id for s in shots} and len(shots) == 7
