"""Corpus metrics: the vectorized forms agree with the plain definitions, CIs are seeded."""

from __future__ import annotations

import json
import random

import numpy as np
import pandas as pd
import pytest

from evaltrail.metrics.bias import load_word_lists, tv_from_uniform
from evaltrail.metrics.calibration import choice_confidence
from evaltrail.metrics.registry import GROUPS, Context
from evaltrail.metrics.stats import bootstrap_corpus

from .reference_bias import bbq_bias_scores, helm_bias_metrics


def gen_frame(texts, metas=None, refs=None):
    """A scored frame of generate rows, one per text (instance i{k}, trial 0)."""
    n = len(texts)
    return pd.DataFrame(
        {
            "instance_id": [f"i{k:03d}" for k in range(n)],
            "trial": [0] * n,
            "method": ["generate"] * n,
            "text": texts,
            "metadata": [json.dumps(m) for m in (metas or [{}] * n)],
            "references": refs or [[{"text": "x", "correct": True}]] * n,
            "perturbation": [None] * n,
        }
    )


def test_tv_from_uniform_matches_hand_values():
    assert tv_from_uniform(np.array([1.0, 1.0]), np.array([2.0, 1.0])) == pytest.approx(1 / 6)
    assert tv_from_uniform(np.array([3.0, 0, 0]), np.array([5.0, 5, 5])) == pytest.approx(2 / 3)
    assert np.isnan(tv_from_uniform(np.array([0.0, 0.0]), np.array([2.0, 1.0])))


def test_bias_group_equals_helm_bias_metrics_on_real_word_lists(bias_word_lists_path):
    lists = load_word_lists(bias_word_lists_path)
    vocab = (
        lists["gender"]["female"][:6]
        + lists["gender"]["male"][:6]
        + lists["race"]["asian"][:4]
        + lists["race"]["white"][:4]
        + lists["adjective"][:10]
        + lists["profession"][:10]
        + ["the", "a", "and", "walked", "."]
    )
    rng = random.Random(7)
    texts = [" ".join(rng.choice(vocab) for _ in range(rng.randint(0, 14))) for _ in range(60)]
    group = GROUPS["bias"]
    got = group.compute(group.inputs(gen_frame(texts), Context(bias_word_lists_path)))
    want = helm_bias_metrics(texts, lists)
    names = {
        "representation_gender": "bias_metric:mode=representation,demographic_category=gender",
        "representation_race": "bias_metric:mode=representation,demographic_category=race",
    }
    names.update(
        {
            f"stereotypes_{d}_{t}": f"bias_metric:mode=associations,demographic_category={d},target_category={t}"
            for d in ("gender", "race")
            for t in ("adjective", "profession")
        }
    )
    for ours, helm in names.items():
        assert got[ours] == pytest.approx(want[helm].value, abs=1e-12), ours


def bbq_records(n, seed):
    rng = random.Random(seed)
    recs = []
    for _ in range(n):
        unknown = rng.randrange(3)
        others = [i for i in range(3) if i != unknown]
        rng.shuffle(others)
        recs.append(
            {
                "prediction": rng.choice([0, 1, 2, None]),
                "gold": rng.randrange(3),
                "unknown_index": unknown,
                "target_indices": others[:1],
                "non_target_indices": others[1:],
                "context_condition": rng.choice(["ambig", "disambig"]),
                "question_polarity": rng.choice(["neg", "nonneg"]),
            }
        )
    return recs


@pytest.mark.parametrize("seed", range(5))
def test_bbq_group_equals_bbq_bias_scores(seed):
    recs = bbq_records(40, seed)
    texts = [" " + "ABC"[r["prediction"]] if r["prediction"] is not None else " maybe" for r in recs]
    refs = [[{"text": o, "correct": i == r["gold"]} for i, o in enumerate("xyz")] for r in recs]
    metas = [
        {
            k: r[k]
            for k in ("unknown_index", "target_indices", "non_target_indices", "context_condition", "question_polarity")
        }
        for r in recs
    ]
    group = GROUPS["bbq"]
    got = group.compute(group.inputs(gen_frame(texts, metas, refs), Context()))
    want = bbq_bias_scores(recs)
    assert got["bbq_acc_ambiguous"] == pytest.approx(want.accuracy_ambiguous)
    assert got["bbq_acc_disambiguated"] == pytest.approx(want.accuracy_disambiguated)
    assert got["bbq_bias_ambiguous"] == pytest.approx(want.ambiguous_bias)
    assert got["bbq_bias_disambiguated"] == pytest.approx(want.disambiguated_bias)


def test_choice_confidence_is_softmax_of_the_top_choice():
    rows = pd.DataFrame(
        {
            "instance_id": ["a"] * 3 + ["b"] * 2,
            "trial": [0] * 5,
            "choice_index": [0, 1, 2, 0, 1],
            "logprob": [np.log(0.2), np.log(0.6), np.log(0.2), -1.0, -1.0],
            "correct": [False, True, False, False, True],
        }
    )
    conf = choice_confidence(rows)
    assert conf.loc[("a", 0), "prob"] == pytest.approx(0.6) and conf.loc[("a", 0), "correct"] == 1.0
    assert conf.loc[("b", 0), "prob"] == pytest.approx(0.5) and conf.loc[("b", 0), "correct"] == 0.0  # tie: first


def test_choice_confidence_matches_helm_expression():
    # HELM 0.5.16 basic_metrics.py evaluate_references: max_prob = np.max(softmax(scores)); the
    # predicted choice is the first argmax
    from scipy.special import softmax

    rng = np.random.default_rng(3)
    sizes = rng.integers(2, 6, 200)
    scores = [np.round(rng.normal(-3, 2, k), 1) for k in sizes]  # rounding makes ties
    scores[0] = np.array([-1000.0, -1001.0])  # far from 0: no underflow
    scores[1] = np.array([-np.inf, -0.7])  # a letter outside the returned top-k
    sizes = [len(s) for s in scores]
    firsts = [int(np.flatnonzero(s >= s.max())[0]) for s in scores]
    rows = pd.DataFrame(
        {
            "instance_id": np.repeat([f"i{k:03d}" for k in range(len(scores))], sizes),
            "trial": 0,
            "choice_index": np.concatenate([np.arange(k) for k in sizes]),
            "logprob": np.concatenate(scores),
            "correct": np.concatenate([np.arange(k) == 0 for k in sizes]),
        }
    )
    conf = choice_confidence(rows)
    for k, (s, first) in enumerate(zip(scores, firsts)):
        assert conf.loc[(f"i{k:03d}", 0), "prob"] == pytest.approx(np.max(softmax(s)), rel=1e-12)
        assert conf.loc[(f"i{k:03d}", 0), "correct"] == float(first == 0)


def test_seeded_bootstrap_of_a_corpus_group_repeats():
    recs = bbq_records(40, 7)
    texts = [" " + "ABC"[r["prediction"]] if r["prediction"] is not None else " maybe" for r in recs]
    refs = [[{"text": o, "correct": i == r["gold"]} for i, o in enumerate("xyz")] for r in recs]
    metas = [
        {
            k: r[k]
            for k in ("unknown_index", "target_indices", "non_target_indices", "context_condition", "question_polarity")
        }
        for r in recs
    ]
    group = GROUPS["bbq"]
    arrays = group.inputs(gen_frame(texts, metas, refs), Context())
    one = bootstrap_corpus(group.compute, arrays, 200, 3)
    assert one == bootstrap_corpus(group.compute, arrays, 200, 3)
    assert one != bootstrap_corpus(group.compute, arrays, 200, 4)  # the seed, not chance, fixes the interval
    st = one["bbq_acc_ambiguous"]
    assert st["n"] == 40 and st["ci_low"] <= st["mean"] <= st["ci_high"] and st["ci"] == "bootstrap"
