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
    frame = pd.DataFrame({
        "instance_id": ["i", "i"], "trial": [0, 0], "choice_index": [0, 1],
        "logprob": [-4.0, -6.0], "continuation": [" ab", " abcdefghijk"], "correct": [False, True]})
    assert get_metric("acc")(frame).tolist() == [0.0]
    assert get_metric("acc_norm")(frame).tolist() == [1.0]


def test_ties_break_to_first_choice():
    frame = pd.DataFrame({"instance_id": ["i"] * 3, "trial": [0] * 3, "choice_index": [2, 0, 1],
                          "logprob": [-1.0, -1.0, -3.0], "continuation": ["a", "a", "a"],
                          "correct": [False, True, False]})
    assert get_metric("acc")(frame).tolist() == [1.0]


def test_mean_ci_is_deterministic_and_brackets_the_mean():
    x = np.r_[np.ones(30), np.zeros(70)]
    a, b = mean_ci(x, 1000, 0), mean_ci(x, 1000, 0)
    assert a == b and a["n"] == 100 and a["mean"] == pytest.approx(0.3)
    assert a["ci_low"] < 0.3 < a["ci_high"] and 0.15 < a["ci_low"] and a["ci_high"] < 0.45
    assert mean_ci([], 10, 0)["mean"] is None
