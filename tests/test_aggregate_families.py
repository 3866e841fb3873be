"""Family tables with HELM's mean win rate, pairwise ratings/differences, plot data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from evaltrail.aggregate import families, pairwise, plots


def st(mean, family="accuracy", hib=True, ci="wilson"):
    return {
        "mean": mean,
        "ci_low": mean - 0.1,
        "ci_high": mean + 0.1,
        "n": 10,
        "family": family,
        "higher_is_better": hib,
        "ci": ci,
    }


def summ(main, **metrics):
    return {"main_metric": main, "metrics": metrics}


SUMMARIES = {
    ("mmlu", "a"): summ(
        "exact_match",
        exact_match=st(0.3),
        ece_10_bin=st(0.2, "calibration", False, "bootstrap"),
        **{"exact_match/robustness": st(0.2, "robustness")},
    ),
    ("mmlu", "b"): summ(
        "exact_match",
        exact_match=st(0.5),
        ece_10_bin=st(0.1, "calibration", False, "bootstrap"),
        **{"exact_match/robustness": st(0.2, "robustness")},
    ),
    ("mmlu", "c"): summ(
        "exact_match",
        exact_match=st(0.4),
        ece_10_bin=st(0.3, "calibration", False, "bootstrap"),
        **{"exact_match/robustness": st(0.1, "robustness")},
    ),
    ("rtp", "a"): summ("toxic_fraction", toxic_fraction=st(0.1, "toxicity", False)),
    ("rtp", "b"): summ("toxic_fraction", toxic_fraction=st(0.3, "toxicity", False)),
    ("rtp", "c"): summ("toxic_fraction", toxic_fraction=st(0.2, "toxicity", False)),
}


def test_family_tables_and_hand_computed_win_rates():
    tables = {t.family: t for t in families.family_tables(SUMMARIES)}
    assert list(tables) == ["accuracy", "calibration", "robustness", "toxicity"]
    assert tables["accuracy"].columns == ["mmlu: exact_match"]  # rtp's main metric is not accuracy
    # accuracy: b beats a and c, c beats a -> 1, 0.5, 0
    assert tables["accuracy"].win_rate.to_dict() == {"a": 0.0, "b": 1.0, "c": 0.5}
    assert tables["calibration"].win_rate.to_dict() == {"a": 0.5, "b": 1.0, "c": 0.0}  # lower ECE wins
    assert tables["robustness"].win_rate.to_dict() == {"a": 0.75, "b": 0.75, "c": 0.0}  # a tie is worth 1/2
    assert tables["toxicity"].win_rate.to_dict() == {"a": 1.0, "b": 0.0, "c": 0.5}
    md = "\n".join(families.to_markdown(list(tables.values())))
    assert "| b | 1.000 | 0.500 [0.400, 0.600] |" in md
    rec = families.to_records(list(tables.values()))[0]
    assert rec["rows"][1] == {
        "model": "b",
        "mean_win_rate": 1.0,
        "cells": {"mmlu: exact_match": {"mean": 0.5, "ci_low": 0.4, "ci_high": 0.6, "n": 10}},
    }


def scores(values: dict[str, list[float]]) -> dict:
    return {
        ("s", m): pd.DataFrame(
            {
                "instance_id": [f"i{k}" for k in range(len(v))],
                "metric": "acc",
                "value": v,
                "perturbation": None,
                "trial": 0,
                "original_id": [f"i{k}" for k in range(len(v))],
            }
        )
        for m, v in values.items()
    }


def test_pairwise_ratings_and_paired_differences():
    rng = np.random.default_rng(0)
    strong, weak = (rng.random(200) < 0.7).astype(float), (rng.random(200) < 0.3).astype(float)
    summaries = {("s", m): summ("acc", acc=st(0.5)) for m in ("strong", "weak")}
    outcomes = pairwise.main_outcomes(scores({"strong": list(strong), "weak": list(weak)}), summaries)
    table, fit = pairwise.ratings(outcomes, 200, 0)
    assert fit == "mle" and list(table.index) == ["strong", "weak"]
    assert table.loc["strong", "rating"] > 1000 > table.loc["weak", "rating"]
    assert table["rating"].mean() == pytest.approx(1000) and table.loc["strong", "rank"] == 1
    assert table.loc["weak", "rank"] == 2  # the CIs separate: strong's lower bound beats weak's upper bound
    diffs = pairwise.differences(outcomes, 500, 0)
    d = diffs.iloc[0]
    assert d["diff"] == pytest.approx(strong.mean() - weak.mean()) and not d["includes_zero"]


def test_pairwise_falls_back_to_a_penalized_fit_when_one_model_never_loses():
    summaries = {("s", m): summ("acc", acc=st(0.5)) for m in ("x", "y")}
    outcomes = pairwise.main_outcomes(scores({"x": [1.0] * 5, "y": [0.0] * 5}), summaries)
    table, fit = pairwise.ratings(outcomes, 50, 0)
    assert fit == "l2 (C=1)" and table.loc["x", "rating"] > table.loc["y", "rating"]


def test_plot_tables_and_subject_breakdown():
    summaries = {
        ("mmlu", m): {
            "main_metric": "exact_match",
            "metrics": {
                "exact_match": st(v),
                "prompt_tokens": st(90.0, "efficiency"),
                "output_tokens": st(10.0, "efficiency"),
            },
            "groups": {
                "anatomy": {"exact_match": {"n": 2, "mean": v}},
                "virology": {"exact_match": {"n": 4, "mean": v / 2}},
            },
            "reliability": [{"bin": 0, "confidence": 0.4, "accuracy": 0.3, "n": 6}],
        }
        for m, v in (("a", 0.5), ("b", 0.8))
    }
    cost = plots.accuracy_vs_tokens(summaries)
    assert list(cost["label"]) == ["a · mmlu", "b · mmlu"] and list(cost["tokens_per_instance"]) == [100.0, 100.0]
    assert len(plots.reliability(summaries)) == 2
    subj = plots.subjects(summaries)
    assert list(zip(subj["subject"], subj["model"], subj["accuracy"])) == [
        ("anatomy", "a", 0.5),
        ("virology", "a", 0.25),
        ("anatomy", "b", 0.8),
        ("virology", "b", 0.4),
    ]
    md = "\n".join(plots.subjects_markdown(subj, summaries))
    assert "| **macro average** (over subjects) | 2 | 0.375 | 0.600 |" in md
    assert "| **micro average** (over questions) | 6 | 0.500 | 0.800 |" in md


def test_a_headline_undefined_for_one_model_shows_a_dash():
    """BBQ's bias score is undefined for a model that never gives a non-unknown answer: the
    family table keeps the column (the other model has it) and shows a dash, no crash."""
    undefined = {"mean": None, "ci_low": None, "ci_high": None, "n": 48, "family": "bias", "higher_is_better": False}
    tables = families.family_tables(
        {
            ("bbq", "a"): summ("exact_match", bbq_bias_ambiguous=st(0.1, "bias", False)),
            ("bbq", "b"): summ("exact_match", bbq_bias_ambiguous=undefined),
        }
    )
    bias = next(t for t in tables if t.family == "bias")
    assert bias.columns == ["bbq: bbq_bias_ambiguous"]
    md = "\n".join(families.to_markdown([bias]))
    assert "| b | — | — |" in md and "| a | — | 0.100 [0.000, 0.200] |" in md
