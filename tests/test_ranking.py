"""Leaderboard ranking statistics: HELM mean win rate, Arena-style Bradley–Terry, paired bootstrap."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression

from evaltrail.aggregate.ranking import (
    arena_ratings,
    battles_from_outcomes,
    bt_ratings,
    column_win_rates,
    mean_win_rate,
    paired_bootstrap,
    rank_by_ci,
)

# Bootstrap sizes stay small: a benchmark may be running on the same machine.
SAMPLES = 200


# --- mean win rate -------------------------------------------------------------------------------------


def hand_table() -> tuple[pd.DataFrame, dict]:
    """3 models × 2 ordered columns (a tie in acc, a missing loss), an unordered column, a 1-value column."""
    table = pd.DataFrame(
        {"acc": [0.9, 0.7, 0.7], "loss": [np.nan, 1.0, 2.0], "params": [1.0, 2.0, 3.0], "solo": [5.0, np.nan, np.nan]},
        index=["A", "B", "C"],
    )
    return table, {"acc": "higher", "loss": "lower", "params": None, "solo": "higher"}


def test_win_rates_by_hand():
    table, directions = hand_table()
    wr = mean_win_rate(table, directions)
    # acc: A beats B and C -> 2/2; B ties C, loses to A -> 0.5/2; C likewise.
    # loss (lower is better): A has no value, so B and C only face each other: B 1/1, C 0/1.
    assert wr.per_column["acc"].tolist() == [1.0, 0.25, 0.25]
    assert wr.per_column["loss"].iloc[1:].tolist() == [1.0, 0.0] and np.isnan(wr.per_column.loc["A", "loss"])
    # A is averaged over acc only (its missing loss neither counts against it nor for it).
    assert wr.mean.to_dict() == {"A": 1.0, "B": 0.625, "C": 0.125}
    assert wr.skipped == ("params", "solo") and list(wr.per_column.columns) == ["acc", "loss"]


def test_win_rates_match_helm_incomplete_values_case():
    """crfm-helm 0.5.16 test_compute_win_rates_incomplete_values: the expected numbers come from HELM."""
    table = pd.DataFrame({"A": [1, 2, 3, 4, 5], "B": [3, 1, None, None, None]}, index=list("abcde"))
    wr = mean_win_rate(table, {"A": "higher", "B": "higher"})
    assert wr.mean.tolist() == [0.5, 0.125, 0.5, 0.75, 1.0]


def test_win_rates_all_missing_is_nan_and_directions_are_required():
    table = pd.DataFrame({"x": [np.nan, np.nan]}, index=["A", "B"])
    assert mean_win_rate(table, {"x": "higher"}).mean.isna().all()
    with pytest.raises(ValueError, match="no direction"):
        mean_win_rate(table, {})
    with pytest.raises(ValueError, match="direction"):
        column_win_rates(table["x"], "up")


# --- battles -------------------------------------------------------------------------------------------


def test_battles_from_outcomes_pairs_models_on_shared_instances():
    long = pd.DataFrame(
        {
            "instance_id": [1, 1, 1, 2, 2, 2],
            "model": ["C", "A", "B", "A", "B", "C"],
            "value": [1.0, 1.0, 0.0, 0.0, np.nan, 1.0],
        }
    )
    got = battles_from_outcomes(long, "higher")
    assert got.values.tolist() == [
        [1, "A", "B", "model_a"],
        [1, "A", "C", "tie"],
        [1, "B", "C", "model_b"],
        [2, "A", "C", "model_b"],
    ]
    flipped = battles_from_outcomes(long, "lower")
    assert flipped["winner"].tolist() == ["model_b", "tie", "model_a", "model_a"]
    with pytest.raises(ValueError, match="duplicate"):
        battles_from_outcomes(pd.concat([long, long.iloc[:1]]), "higher")


# --- Bradley–Terry -------------------------------------------------------------------------------------


def battles(rows: list[tuple[str, str, str, int]]) -> pd.DataFrame:
    """(model_a, model_b, winner, count) → one row per battle."""
    return pd.DataFrame([(a, b, w) for a, b, w, k in rows for _ in range(k)], columns=["model_a", "model_b", "winner"])


TOY = battles(
    [
        ("A", "B", "model_a", 3),
        ("A", "B", "model_b", 1),
        ("B", "C", "model_a", 2),
        ("C", "B", "model_a", 1),
        ("A", "C", "tie", 2),
        ("C", "A", "model_a", 1),
        ("A", "C", "model_a", 2),
        ("B", "C", "tie", 1),
    ]
)


def direct_sklearn_fit(df: pd.DataFrame, C: float) -> pd.Series:
    """The Arena notebook recipe done by hand: every battle twice, a tie as one win each, ±ln 10 columns."""
    models = sorted(set(df["model_a"]) | set(df["model_b"]))
    X, y = [], []
    for a, b, w in df[["model_a", "model_b", "winner"]].itertuples(index=False):
        row = np.zeros(len(models))
        row[models.index(a)], row[models.index(b)] = math.log(10), -math.log(10)
        X += [row, row]
        y += {"model_a": [1, 1], "model_b": [0, 0], "tie": [1, 0]}[w]
    lr = LogisticRegression(C=C, fit_intercept=False, tol=1e-10, max_iter=10_000).fit(np.array(X), np.array(y))
    r = 400 * lr.coef_[0]
    return pd.Series(r - r.mean() + 1000, index=models)


@pytest.mark.parametrize("C", [None, 1.0])
def test_bt_equals_a_direct_logistic_regression(C):
    ours = bt_ratings(TOY, C=C)
    ref = direct_sklearn_fit(TOY, np.inf if C is None else C)
    pd.testing.assert_series_equal(ours.sort_index(), ref.sort_index(), check_names=False, atol=0.05, rtol=0)
    assert ours.mean() == pytest.approx(1000)


def test_bt_two_models_closed_form_and_anchor():
    df = battles([("A", "B", "model_a", 3), ("B", "A", "model_a", 1)])  # P(A beats B) = 3/4
    r = bt_ratings(df)
    assert r["A"] - r["B"] == pytest.approx(400 * math.log10(3), abs=0.05)
    anchored = bt_ratings(df, anchor="B")
    assert anchored["B"] == pytest.approx(1000) and anchored["A"] == pytest.approx(1000 + 400 * math.log10(3), abs=0.05)


@pytest.mark.parametrize(
    "rows",
    [
        [("A", "B", "model_a", 2), ("A", "B", "model_b", 2)],
        [("A", "B", "model_a", 1), ("B", "C", "model_a", 1), ("C", "A", "model_a", 1)],
        [("A", "B", "tie", 3), ("B", "C", "tie", 1)],
    ],
    ids=["split", "cycle", "ties"],
)
def test_bt_symmetric_cases_give_equal_ratings(rows):
    r = bt_ratings(battles(rows))
    assert np.allclose(r.to_numpy(), 1000.0, atol=0.01)


def test_bt_refuses_a_nonexistent_mle_unless_penalized():
    df = battles([("A", "B", "model_a", 3)])
    with pytest.raises(ValueError, match="does not exist"):
        bt_ratings(df)
    r = bt_ratings(df, C=1.0)
    assert r["A"] > r["B"]


def test_rank_rule_on_constructed_cis():
    lower = pd.Series({"A": 1100.0, "B": 1050.0, "C": 900.0, "D": 890.0, "E": 1000.0})
    upper = pd.Series({"A": 1200.0, "B": 1120.0, "C": 1000.0, "D": 905.0, "E": 1050.0})
    # C: A and B have lower bounds above 1000. D: A, B, E are above 905, C's 900 is not.
    # E: only A; B's lower bound 1050 equals E's upper bound, which does not count as beating it.
    assert rank_by_ci(lower, upper).to_dict() == {"A": 1, "B": 1, "C": 3, "D": 4, "E": 2}


def test_arena_bootstrap_is_deterministic_under_a_seed():
    one = arena_ratings(TOY, samples=SAMPLES, seed=7)
    two = arena_ratings(TOY, samples=SAMPLES, seed=7)
    pd.testing.assert_frame_equal(one.bootstrap, two.bootstrap)
    pd.testing.assert_frame_equal(one.table, two.table)
    other = arena_ratings(TOY, samples=SAMPLES, seed=8)
    assert not one.bootstrap.equals(other.bootstrap)
    t = one.table
    assert list(t.columns) == ["rating", "ci_low", "ci_high", "rank", "battles"]
    assert (t["ci_low"] <= t["ci_high"]).all() and t["battles"].to_dict() == {"A": 9, "B": 8, "C": 9}
    pd.testing.assert_series_equal(t["rating"], bt_ratings(TOY), check_names=False)


# --- paired bootstrap ----------------------------------------------------------------------------------


def test_paired_bootstrap_clear_difference():
    a = pd.Series([1.0] * 30 + [0.0] * 10, index=range(40))
    b = pd.Series([0.0] * 40, index=range(40)[::-1])  # same instances, other order: aligned by id
    d = paired_bootstrap(a, b, samples=SAMPLES, seed=0)
    assert d.n == 40 and d.diff == pytest.approx(0.75) and d.mean_a == pytest.approx(0.75)
    assert 0 < d.ci_low < 0.75 < d.ci_high and not d.includes_zero


def test_paired_bootstrap_zero_difference_and_seed():
    a, b = np.array([1.0, 0.0] * 20), np.array([0.0, 1.0] * 20)
    d = paired_bootstrap(a, b, samples=SAMPLES, seed=3)
    assert d.diff == 0.0 and d.includes_zero and d.ci_low < 0 < d.ci_high
    assert paired_bootstrap(a, b, samples=SAMPLES, seed=3) == d
    same = paired_bootstrap(a, a, samples=SAMPLES, seed=3)
    assert (same.ci_low, same.ci_high, same.includes_zero) == (0.0, 0.0, True)
    with pytest.raises(ValueError, match="different instances"):
        paired_bootstrap(pd.Series([1.0], index=["x"]), pd.Series([1.0], index=["y"]), samples=SAMPLES, seed=0)
