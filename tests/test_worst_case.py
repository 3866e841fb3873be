"""Worst case over an instance and its variants (HELM's robustness / fairness aggregation)."""

from __future__ import annotations

import pandas as pd
import pytest

from evaltrail.metrics.worst_case import worst_case


def rows(*recs):
    return pd.DataFrame(recs, columns=["instance_id", "original_id", "perturbation", "trial", "value"])


def by(out: pd.DataFrame) -> dict:
    return {(r.metric, r.instance_id, r.trial): r.value for r in out.itertuples()}


def test_hand_computed_worst_cases_per_perturbation_and_family():
    scores = rows(
        ("a", "a", None, 0, 1.0),
        ("b", "b", None, 0, 1.0),
        ("c", "c", None, 0, 0.0),
        ("a1", "a", "mild_mix", 0, 0.0),  # robustness breaks a
        ("b1", "b", "dialect", 0, 0.0),  # fairness breaks b
        ("c1", "c", "dialect", 0, 1.0),
    )  # a variant can't lift the original: worst stays 0
    out = by(worst_case(scores, "em", higher_is_better=True))
    assert out == {
        ("em/mild_mix", "a", 0): 0.0,
        ("em/mild_mix", "b", 0): 1.0,
        ("em/mild_mix", "c", 0): 0.0,
        ("em/dialect", "a", 0): 1.0,
        ("em/dialect", "b", 0): 0.0,
        ("em/dialect", "c", 0): 0.0,
        ("em/robustness", "a", 0): 0.0,
        ("em/robustness", "b", 0): 1.0,
        ("em/robustness", "c", 0): 0.0,
        ("em/fairness", "a", 0): 1.0,
        ("em/fairness", "b", 0): 0.0,
        ("em/fairness", "c", 0): 0.0,
    }


def test_lower_is_better_takes_the_max_and_trials_stay_apart():
    scores = rows(
        ("a", "a", None, 0, 1.5), ("a", "a", None, 1, 1.0), ("a1", "a", "typos", 0, 2.0), ("a1", "a", "typos", 1, 0.5)
    )
    out = by(worst_case(scores, "bpb", higher_is_better=False))
    assert out[("bpb/typos", "a", 0)] == 2.0 and out[("bpb/typos", "a", 1)] == 1.0
    assert out[("bpb/robustness", "a", 0)] == 2.0 and ("bpb/fairness", "a", 0) not in out


def test_contrast_sets_count_as_robustness_and_no_variants_means_no_rows():
    scores = rows(("a", "a", None, 0, 1.0), ("x", "a", "contrast_set", 0, 0.0))
    assert by(worst_case(scores, "qem", True))[("qem/robustness", "a", 0)] == 0.0
    assert worst_case(rows(("a", "a", None, 0, 1.0)), "qem", True).empty


@pytest.mark.parametrize("hib", [True, False])
def test_worst_case_never_beats_the_original(hib):
    import numpy as np

    rng = np.random.default_rng(0)
    recs = [(f"i{k}", f"i{k}", None, 0, float(rng.random())) for k in range(30)]
    recs += [
        (f"v{k}{p}", f"i{k}", p, 0, float(rng.random()))
        for k in range(30)
        for p in ("typos", "dialect")
        if rng.random() < 0.7
    ]
    scores = rows(*recs)
    out = worst_case(scores, "m", hib).set_index(["metric", "instance_id"])["value"]
    orig = scores[scores["perturbation"].isna()].set_index("instance_id")["value"]
    for view in ("m/robustness", "m/fairness", "m/typos"):
        diff = (out[view] - orig.reindex(out[view].index)).to_numpy()
        assert ((diff <= 0) if hib else (diff >= 0)).all()
