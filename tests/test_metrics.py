"""Metrics: registry, exact match, acc vs acc_norm, bootstrap CIs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from evaltrail.errors import EvaltrailError
from evaltrail.metrics import get_metric, list_metrics
from evaltrail.metrics.stats import mean_ci


def test_registry():
    assert {"exact_match", "acc", "acc_norm"} <= set(list_metrics())
    with pytest.raises(EvaltrailError, match="valid: acc"):
        get_metric("accuracy")


def test_exact_match_strips_whitespace_only():
    em = get_metric("exact_match")
    assert em("B", " B") == 1.0 and em("B", "b") == 0.0 and em("B", "") == 0.0


def test_acc_and_acc_norm_differ_on_length():
    # choice 0: short and likelier in total; choice 1: long, likelier per character (gold)
    frame = pd.DataFrame(
        {
            "instance_id": ["i", "i"],
            "trial": [0, 0],
            "choice_index": [0, 1],
            "logprob": [-4.0, -6.0],
            "continuation": [" ab", " abcdefghijk"],
            "correct": [False, True],
        }
    )
    assert get_metric("acc")(frame).tolist() == [0.0]
    assert get_metric("acc_norm")(frame).tolist() == [1.0]


def test_acc_norm_counts_the_leading_space_and_acc_norm_nospace_does_not():
    # " ab": -3.0 over 3 characters (-1.0) or 2 (-1.5); " abcd": -5.5 over 5 (-1.1) or 4 (-1.375):
    # lighteval's acc_norm (space counted) picks the short option, lm-eval's (space not counted) the
    # long one; an option without a leading space is divided by its full length either way
    frame = pd.DataFrame(
        {
            "instance_id": ["i", "i", "j", "j"],
            "trial": [0] * 4,
            "choice_index": [0, 1, 0, 1],
            "logprob": [-3.0, -5.5, -3.0, -5.5],
            "continuation": [" ab", " abcd", "ab", "abcd"],
            "correct": [True, False, True, False],
        }
    )
    assert get_metric("acc_norm")(frame).tolist() == [1.0, 0.0]
    assert get_metric("acc_norm_nospace")(frame).tolist() == [0.0, 0.0]


def test_ties_break_to_first_choice():
    frame = pd.DataFrame(
        {
            "instance_id": ["i"] * 3,
            "trial": [0] * 3,
            "choice_index": [2, 0, 1],
            "logprob": [-1.0, -1.0, -3.0],
            "continuation": ["a", "a", "a"],
            "correct": [False, True, False],
        }
    )
    assert get_metric("acc")(frame).tolist() == [1.0]


def test_mean_ci_is_deterministic_and_brackets_the_mean():
    x = np.r_[np.ones(30), np.zeros(70)]
    a, b = mean_ci(x, 1000, 0), mean_ci(x, 1000, 0)
    assert a == b and a["n"] == 100 and a["mean"] == pytest.approx(0.3)
    assert a["ci_low"] < 0.3 < a["ci_high"] and 0.15 < a["ci_low"] and a["ci_high"] < 0.45
    assert mean_ci([], 10, 0)["mean"] is None


def test_quasi_exact_match_helm_normalization():
    q = get_metric("quasi_exact_match")
    assert q("The Eiffel Tower", "eiffel tower.") == 1.0
    assert q("an apple", "Apple!") == 1.0
    assert q("theory", "ory") == 0.0  # "the" inside a word is not an article
    assert q("yes", "") == 0.0 and q("", "") == 0.0  # empty prediction scores 0
    assert q("don’t", "dont") == 0.0  # ’ is not ASCII punctuation: kept, as HELM does


def test_f1_is_over_token_sets():
    f1 = get_metric("f1_score")
    assert f1("the cat sat", "cat cat sat") == 1.0  # sets: {cat, sat} vs {cat, sat}
    assert f1("cat sat on mat", "cat") == pytest.approx(2 * 1 * 0.25 / 1.25)
    assert f1("cat", "") == 0.0 and f1("", "cat") == 0.0 and f1("a", "the") == 0.0


def test_rouge_l_uses_stemming():
    r = get_metric("rouge_l")
    assert r("the cats sat", "a cat sat") == pytest.approx(2 / 3)
    assert r("x", "") == 0.0


def test_final_number_exact_match():
    fn = get_metric("final_number_exact_match")
    assert fn("She pays 3 * 6 = 18. The answer is 18.", "so 9 + 9 = 18 dollars") == 1.0
    assert fn("The answer is 1,200.", "I think 1200") == 1.0
    assert fn("The answer is 7.", "The answer is 7.5") == 0.0
    assert fn("The answer is -3.", "no number") == 0.0


def test_acc_uses_calibrated_logprob_when_present():
    frame = pd.DataFrame(
        {
            "instance_id": ["i", "i"],
            "trial": [0, 0],
            "choice_index": [0, 1],
            "logprob": [-2.0, -3.0],
            "continuation": [" a", " b"],
            "correct": [False, True],
            "calibrated_logprob": [-2.0 + 1.0, -3.0 + 4.0],
        }
    )
    assert get_metric("acc")(frame).tolist() == [1.0]


def test_language_modeling_metrics():
    frame = pd.DataFrame(
        {
            "instance_id": ["d"],
            "trial": [0],
            "logprob": [-10 * np.log(2)],
            "num_output_tokens": [5],
            "prompt": ["abcde"],
        }
    )
    assert get_metric("bits_per_byte")(frame).tolist() == pytest.approx([2.0])
    assert get_metric("perplexity")(frame).tolist() == pytest.approx([4.0])
    assert not get_metric("perplexity").higher_is_better


def test_analytic_ci_wilson_for_binary_and_t_otherwise():
    from evaltrail.metrics.stats import mean_ci_analytic

    st = mean_ci_analytic([1.0] * 50 + [0.0] * 50)  # Wilson 95% for 50/100: [0.4038, 0.5962]
    assert st["ci"] == "wilson" and st["mean"] == 0.5
    assert st["ci_low"] == pytest.approx(0.40383, abs=1e-4) and st["ci_high"] == pytest.approx(0.59617, abs=1e-4)
    allright = mean_ci_analytic([1.0] * 20)  # stays inside [0, 1] and is not degenerate at 100%
    assert allright["ci_high"] == pytest.approx(1.0) and 0.8 < allright["ci_low"] < 1.0
    for n in range(2, 400):  # never a hair outside [0, 1] (n=164 at 0% once printed -0.0000)
        none, every = mean_ci_analytic([0.0] * n), mean_ci_analytic([1.0] * n)
        assert none["ci_low"] == 0.0 and every["ci_high"] == 1.0 and none["ci_high"] < 1 and every["ci_low"] > 0
    t = mean_ci_analytic([1.0, 2.0, 3.0, 4.0])  # mean 2.5, sd 1.291, t(0.975, 3) = 3.182
    assert t["ci"] == "t" and t["ci_low"] == pytest.approx(2.5 - 3.1824 * 1.29099 / 2, abs=1e-3)
    assert mean_ci_analytic([])["mean"] is None and mean_ci_analytic([0.3])["ci_low"] == 0.3


def test_every_family_is_registered():
    from evaltrail.metrics import FAMILIES

    families = {get_metric(m).family for m in list_metrics()}
    assert families == set(FAMILIES) - {"robustness", "fairness"}  # those two are worst-case views
    for name in (
        "prefix_exact_match",
        "squad_f1",
        "rouge_2",
        "bleu_4",
        "ece_10_bin",
        "selective_acc_at_10",
        "expected_max_toxicity",
        "representation_gender",
        "bbq_bias_ambiguous",
        "prompt_tokens",
    ):
        assert name in list_metrics()
    for name in ("runtime_s", "tokens_per_s", "evaluated_tokens"):  # measurements of the machine: results/costs
        assert name not in list_metrics()
        with pytest.raises(
            EvaltrailError, match=f"'{name}' is a measurement of the machine, recorded by infer in results/costs/"
        ):
            get_metric(name)


def test_mean_ci_count_resampling_matches_instance_resampling():
    """Few distinct values are resampled as multinomial counts; the interval must agree with
    resampling instances (the two are the same distribution), here to Monte Carlo precision."""
    from evaltrail.metrics import stats

    x = np.random.default_rng(1).choice([-1.0, 0.0, 1.0], size=400, p=[0.2, 0.5, 0.3])
    counts = stats.mean_ci(x, samples=20_000, seed=0)
    few = stats.FEW_VALUES
    try:
        stats.FEW_VALUES = 0  # force the instance-resampling path
        instances = stats.mean_ci(x, samples=20_000, seed=0)
    finally:
        stats.FEW_VALUES = few
    assert counts["mean"] == instances["mean"] == pytest.approx(0.1, abs=0.05)
    assert counts["ci_low"] == pytest.approx(instances["ci_low"], abs=0.005)
    assert counts["ci_high"] == pytest.approx(instances["ci_high"], abs=0.005)
    # many distinct values take the blocked instance path; the block size does not change the draws' law
    y = np.random.default_rng(2).normal(size=300)
    st = stats.mean_ci(y, samples=2_000, seed=0)
    assert st["ci_low"] < st["mean"] < st["ci_high"]
