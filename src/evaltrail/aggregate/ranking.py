"""Ranking statistics for the leaderboard: HELM mean win rate, Arena-style Bradley–Terry, paired bootstrap.

Pure functions over pandas/numpy; nothing here reads or writes pipeline artifacts.

* Mean win rate follows `compute_aggregate_row_win_rates` in crfm-helm 0.5.16
  (helm/benchmark/presentation/summarize.py): per column, the fraction of the *other models that have a
  value* that a model beats, a tie counting 1/2; columns without a direction or with fewer than two values
  are skipped; a model's columns are averaged over the columns where it has a value.
* Bradley–Terry ratings follow the Chatbot Arena notebook: a logistic regression without intercept on
  ±ln(base) indicator rows, ratings = scale·coef, a tie worth half a win to each side, bootstrap CIs by
  resampling battles, and rank = 1 + the number of models whose CI lower bound beats my upper bound.
* The paired bootstrap compares two models on the same instances through their per-instance differences.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from scipy.optimize import minimize
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.special import expit

from ..metrics.stats import mean_ci

Direction = Literal["higher", "lower"]
"""Which way is better for a column or metric: larger values ("higher") or smaller ("lower")."""

WINNERS = ("model_a", "model_b", "tie")
"""The outcomes a battle row may record in its `winner` column."""

_TIES = frozenset({"tie", "tie (bothbad)"})  # the Arena logs also record "tie (bothbad)"; both are ties


def _check_direction(direction, *, allow_none: bool) -> None:
    """Reject anything but "higher"/"lower" (and None where a column may be unordered), so a typo never
    silently flips or drops a column."""
    if direction is None and allow_none:
        return
    if direction not in ("higher", "lower"):
        raise ValueError(f"direction must be 'higher' or 'lower'{' or None' if allow_none else ''}, got {direction!r}")


# ---------------------------------------------------------------------------------------------------------
# HELM mean win rate
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WinRates:
    """HELM's mean win rate of every model, with the per-column win rates it averages."""

    mean: pd.Series
    """Per model: mean of its per-column win rates over the used columns where it has a value; NaN when it
    has a value in none of them (HELM's None: never meaningfully comparable)."""

    per_column: pd.DataFrame
    """Models × used columns: the fraction of the other models with a value in that column that the model
    beats (tie = 1/2); NaN where the model has no value."""

    skipped: tuple[str, ...]
    """Columns left out: no direction, or fewer than two models with a value."""


def column_win_rates(values: pd.Series, direction: Direction) -> pd.Series:
    """One column's win rates: (number of others beaten + half the others tied) / (number of others).

    Why ranks: the average rank of a value among the present ones is 1 + #worse + (#tied others)/2, so
    `(rank - 1) / (n - 1)` is exactly HELM's count. Missing values (NaN) take no part: they are neither
    beaten nor counted in the denominator, and their own win rate is NaN.
    """
    _check_direction(direction, allow_none=False)
    x = pd.to_numeric(values, errors="raise").astype("float64")
    present = x.dropna()
    if len(present) < 2:
        return pd.Series(np.nan, index=x.index, dtype="float64")
    ranks = (present if direction == "higher" else -present).rank(method="average")
    return ((ranks - 1.0) / (len(present) - 1)).reindex(x.index)


def mean_win_rate(table: pd.DataFrame, directions: Mapping[str, Direction | None]) -> WinRates:
    """HELM's mean win rate: models (index) × columns (e.g. scenario main metrics) → one number per model.

    `directions` must name every column (None for a column without a meaningful order) so that a column
    is only ever skipped on purpose, as HELM skips `lower_is_better=None` header cells.
    """
    missing = [c for c in table.columns if c not in directions]
    if missing:
        raise ValueError(f"no direction given for columns {missing}; use None to skip a column")
    used, skipped = {}, []
    for col in table.columns:
        direction = directions[col]
        _check_direction(direction, allow_none=True)
        if direction is None or table[col].notna().sum() < 2:
            skipped.append(col)
            continue
        used[col] = column_win_rates(table[col], direction)
    per_column = pd.DataFrame(used, index=table.index, columns=list(used), dtype="float64")
    return WinRates(
        mean=per_column.mean(axis=1, skipna=True).rename("mean_win_rate"), per_column=per_column, skipped=tuple(skipped)
    )


# ---------------------------------------------------------------------------------------------------------
# Battles
# ---------------------------------------------------------------------------------------------------------


def battles_from_outcomes(outcomes: pd.DataFrame, direction: Direction, *, tie_tol: float = 0.0) -> pd.DataFrame:
    """Per-instance results → battles: every pair of models that both have a value on an instance plays
    one battle there (win, loss, or tie when the values differ by at most `tie_tol`).

    `outcomes` is long: columns instance_id, model, value (NaN = no result, so the instance is not shared).
    Returns columns instance_id, model_a, model_b, winner with model_a < model_b, so the output does not
    depend on row order. One (instance, model) pair must appear once: a duplicate would double-count.
    """
    _check_direction(direction, allow_none=False)
    need = ["instance_id", "model", "value"]
    absent = [c for c in need if c not in outcomes.columns]
    if absent:
        raise ValueError(f"outcomes lack columns {absent}")
    df = outcomes[need].dropna(subset=["value"])
    dup = df.duplicated(["instance_id", "model"])
    if dup.any():
        raise ValueError(
            f"{int(dup.sum())} duplicate (instance_id, model) rows, e.g. "
            f"{df.loc[dup, ['instance_id', 'model']].iloc[0].tolist()}"
        )
    pairs = df.merge(df, on="instance_id", suffixes=("_a", "_b"))
    pairs = pairs[pairs["model_a"] < pairs["model_b"]]
    margin = pairs["value_a"].astype("float64") - pairs["value_b"].astype("float64")
    if direction == "lower":
        margin = -margin
    winner = np.where(margin > tie_tol, "model_a", np.where(margin < -tie_tol, "model_b", "tie"))
    out = pd.DataFrame(
        {
            "instance_id": pairs["instance_id"].to_numpy(),
            "model_a": pairs["model_a"].to_numpy(),
            "model_b": pairs["model_b"].to_numpy(),
            "winner": winner,
        }
    )
    return out.sort_values(["instance_id", "model_a", "model_b"], kind="stable").reset_index(drop=True)


@dataclass(frozen=True)
class _Battles:
    """Battles collapsed to distinct (a, b, score) outcomes with counts, oriented so a < b: the form
    every fit and bootstrap round reuses (a million battles of two models are six rows)."""

    models: list[str]
    """Sorted model names; the indices below point into this list."""
    a: np.ndarray
    """Index of the lower-indexed model of each outcome."""
    b: np.ndarray
    """Index of the other model."""
    score: np.ndarray
    """Points of model `a`: 1 win, 0.5 tie, 0 loss."""
    count: np.ndarray
    """How many battles had this outcome."""

    @property
    def n(self) -> int:
        return int(self.count.sum())


def _encode(battles: pd.DataFrame) -> _Battles:
    """Validate and encode once, so bootstrap rounds only reweight a few counts."""
    absent = [c for c in ("model_a", "model_b", "winner") if c not in battles.columns]
    if absent:
        raise ValueError(f"battles lack columns {absent}")
    if len(battles) == 0:
        raise ValueError("no battles")
    winner = battles["winner"].astype(str)
    bad = ~winner.isin(["model_a", "model_b", *_TIES])
    if bad.any():
        raise ValueError(f"unknown winner values {sorted(winner[bad].unique())}; expected {WINNERS}")
    if (battles["model_a"] == battles["model_b"]).any():
        raise ValueError("a model cannot battle itself")
    models = sorted(set(battles["model_a"]) | set(battles["model_b"]))
    code = {m: i for i, m in enumerate(models)}
    ia = battles["model_a"].map(code).to_numpy(np.int64)
    ib = battles["model_b"].map(code).to_numpy(np.int64)
    score = np.where(winner == "model_a", 1.0, np.where(winner == "model_b", 0.0, 0.5))
    swap = ia > ib
    a, b = np.where(swap, ib, ia), np.where(swap, ia, ib)
    points = np.where(swap, 1.0 - score, score)
    # outcome code: pair, then 0 / 1 / 2 for a's 0 / 0.5 / 1 points; np.unique sorts, so the order is fixed
    keys, count = np.unique((a * len(models) + b) * 3 + (2 * points).astype(np.int64), return_counts=True)
    pair, half = np.divmod(keys, 3)
    ua, ub = np.divmod(pair, len(models))
    return _Battles(models=models, a=ua, b=ub, score=half / 2.0, count=count.astype(np.float64))


def _mle_exists(enc: _Battles, weights: np.ndarray) -> bool:
    """Whether the unpenalized BT maximum likelihood is finite (Ford 1957 / Zermelo): the graph "i beat or
    tied j" over the models that played must be strongly connected. Otherwise some group never loses to
    the rest and its ratings run off to infinity, which the solver would only report as non-convergence."""
    p = len(enc.models)
    live = weights > 0
    src = np.concatenate([enc.a[live & (enc.score > 0)], enc.b[live & (enc.score < 1)]])
    dst = np.concatenate([enc.b[live & (enc.score > 0)], enc.a[live & (enc.score < 1)]])
    played = np.zeros(p, dtype=bool)
    played[enc.a[live]] = played[enc.b[live]] = True
    if played.sum() < 2:
        return False
    keep = np.flatnonzero(played)
    remap = -np.ones(p, dtype=np.int64)
    remap[keep] = np.arange(len(keep))
    graph = coo_matrix((np.ones(len(src)), (remap[src], remap[dst])), shape=(len(keep), len(keep)))
    return connected_components(graph, directed=True, connection="strong")[0] == 1


def _design(enc: _Battles, weights: np.ndarray, log_base: float):
    """Pair-aggregated logistic-regression rows with the same likelihood as the Arena notebook's
    "duplicate every battle; a tie becomes one win for each side" rows.

    Each battle carries total weight 2 (a win: 2 on the winner; a tie: 1 on each side), aggregated per
    pair. Every row also appears mirrored (x → -x, y → 1-y, which has the same likelihood) with the weight
    split between the two (scikit-learn needs both classes present; the likelihood is unchanged). Because the
    summed weights equal the notebook's, even an L2-penalized fit (finite C) matches the notebook's penalized fit.
    """
    p = len(enc.models)
    pair = enc.a * p + enc.b
    won = np.bincount(pair, weights=2.0 * weights * enc.score, minlength=p * p)
    lost = np.bincount(pair, weights=2.0 * weights * (1.0 - enc.score), minlength=p * p)
    keys = np.flatnonzero(won + lost)
    i, j = np.divmod(keys, p)
    x = np.zeros((len(keys), p))
    x[np.arange(len(keys)), i] = log_base
    x[np.arange(len(keys)), j] = -log_base
    X = np.vstack([x, -x, x, -x])
    y = np.concatenate([np.ones(len(keys)), np.zeros(len(keys)), np.zeros(len(keys)), np.ones(len(keys))])
    w = np.concatenate([won[keys], won[keys], lost[keys], lost[keys]]) / 2.0
    nz = w > 0
    return X[nz], y[nz], w[nz]


def _anchor(ratings: np.ndarray, models: list[str], anchor: str | None, anchor_rating: float) -> np.ndarray:
    """Shift so the anchor model (or, with anchor=None, the mean over the rated models) sits at
    `anchor_rating`: BT only identifies differences, so the offset is a reporting choice."""
    ref = np.nanmean(ratings) if anchor is None else ratings[models.index(anchor)]
    return ratings + (anchor_rating - ref)


def _loss(beta: np.ndarray, X: np.ndarray, y: np.ndarray, w: np.ndarray, alpha: float):
    """Weighted logistic loss (+ L2 term alpha/2 |beta|^2) and its gradient."""
    z = X @ beta
    p = expit(z)
    value = w @ (np.logaddexp(0.0, z) - y * z) + 0.5 * alpha * beta @ beta
    return value, X.T @ (w * (p - y)) + alpha * beta


def _loss_hessp(beta, v, X, y, w, alpha):
    p = expit(X @ beta)
    return X.T @ (w * p * (1.0 - p) * (X @ v)) + alpha * v


def _fit(
    enc: _Battles,
    weights: np.ndarray,
    *,
    scale: float,
    base: float,
    C: float | None,
    anchor: str | None,
    anchor_rating: float,
    start: np.ndarray | None = None,
) -> np.ndarray:
    """One BT fit; models without a battle under `weights` get NaN.

    The logistic regression scikit-learn's LogisticRegression(fit_intercept=False) solves (C: its
    inverse L2 strength), minimized with scipy's Newton-CG from the exact gradient and Hessian
    product: the same optimum (tested against scikit-learn) without scikit-learn's per-call input
    validation, which dominated the 2,000 bootstrap fits of a tiny problem. Starting at 0, CG stays
    orthogonal to the flat direction (adding a constant to every rating), as the rows sum to 0.
    Bootstrap rounds `start` from the full fit's coefficients (mean 0), a point the optimum is near."""
    X, y, w = _design(enc, weights, math.log(base))
    alpha = 0.0 if C is None else 1.0 / C
    x0 = np.zeros(len(enc.models)) if start is None else start
    res = minimize(
        _loss,
        x0,
        args=(X, y, w, alpha),
        method="Newton-CG",
        jac=True,
        hessp=_loss_hessp,
        options={"xtol": 1e-10, "maxiter": 1000},
    )
    ratings = scale * res.x
    played = np.bincount(enc.a, weights, len(enc.models)) + np.bincount(enc.b, weights, len(enc.models)) > 0
    ratings[~played] = np.nan
    return _anchor(ratings, enc.models, anchor, anchor_rating)


def bt_ratings(
    battles: pd.DataFrame,
    *,
    anchor: str | None = None,
    anchor_rating: float = 1000.0,
    scale: float = 400.0,
    base: float = 10.0,
    C: float | None = None,
) -> pd.Series:
    """Bradley–Terry ratings R with P(i beats j) = 1 / (1 + base ** ((R_j - R_i) / scale)).

    Anchoring: with `anchor=None` (the default) the mean rating is `anchor_rating` (1000); with a model
    name, that model is. `C=None` is the unpenalized MLE (the current Arena notebook); a finite C adds
    scikit-learn's L2 penalty (C=1.0 is the 2023 notebook's default LogisticRegression). An unpenalized fit
    whose MLE does not exist (some models never lose to the others) raises instead of returning the
    solver's arbitrary large numbers.
    """
    return _point(_encode(battles), anchor=anchor, anchor_rating=anchor_rating, scale=scale, base=base, C=C)


def _point(
    enc: _Battles, *, anchor: str | None, anchor_rating: float, scale: float, base: float, C: float | None
) -> pd.Series:
    """`bt_ratings` on already encoded battles (arena_ratings encodes once for the fit and its bootstrap)."""
    if anchor is not None and anchor not in enc.models:
        raise ValueError(f"anchor {anchor!r} is not in the battles")
    weights = enc.count
    if C is None and not _mle_exists(enc, weights):
        raise ValueError(
            "the unpenalized Bradley–Terry MLE does not exist: some models never lose (or never "
            "win) against the rest; pass a finite C for a penalized fit"
        )
    r = _fit(enc, weights, scale=scale, base=base, C=C, anchor=anchor, anchor_rating=anchor_rating)
    return pd.Series(r, index=enc.models, name="rating").sort_values(ascending=False, kind="stable")


def rank_by_ci(lower: pd.Series, upper: pd.Series) -> pd.Series:
    """Arena's rank: 1 + the number of models whose CI lower bound is strictly above my upper bound, so
    models whose intervals overlap share a rank instead of being ordered by noise."""
    lo = lower.to_numpy(dtype="float64")
    hi = upper.reindex(lower.index).to_numpy(dtype="float64")
    beaten_by = lo[None, :] > hi[:, None]  # [i, j]: j's lower bound beats i's upper bound
    return pd.Series(1 + beaten_by.sum(axis=1), index=lower.index, name="rank")


@dataclass(frozen=True)
class ArenaRatings:
    """Bradley–Terry ratings with seeded bootstrap confidence intervals and CI-based ranks."""

    table: pd.DataFrame
    """Index model; columns rating (fit on all battles), ci_low, ci_high (bootstrap percentiles), rank
    (`rank_by_ci`), battles (count); sorted by rating, best first."""

    bootstrap: pd.DataFrame
    """Rounds × models: each round's anchored ratings (NaN for a model absent from that resample)."""

    degenerate_rounds: int
    """Rounds whose unpenalized MLE does not exist (some models never lost in the resample); their ratings
    are wherever the solver stopped, which widens the CI. Always 0 for a penalized fit."""

    anchor: str | None
    """The model held at `anchor_rating` in every round, or None when the mean rating is."""

    anchor_rating: float
    """The rating the anchor (or the mean) sits at."""

    samples: int
    """Bootstrap rounds."""

    seed: int
    """Seed of the resampling: same battles, samples and seed give the same result."""

    level: float
    """Confidence level of the intervals."""


def arena_ratings(
    battles: pd.DataFrame,
    samples: int,
    seed: int,
    level: float = 0.95,
    *,
    anchor: str | None = None,
    anchor_rating: float = 1000.0,
    scale: float = 400.0,
    base: float = 10.0,
    C: float | None = None,
) -> ArenaRatings:
    """BT ratings plus percentile-bootstrap CIs from resampling battles with replacement.

    The point rating is the fit on all battles (as the Arena leaderboard reports it); each round draws
    len(battles) battles with replacement, refits, and re-anchors the same way.
    """
    if samples < 1:
        raise ValueError("samples must be at least 1")
    enc = _encode(battles)
    point = _point(enc, anchor=anchor, anchor_rating=anchor_rating, scale=scale, base=base, C=C)
    n, share = enc.n, enc.count / enc.n
    start = np.nan_to_num((point.reindex(enc.models) - point.mean()).to_numpy() / scale)
    rng = np.random.default_rng(seed)
    rows, degenerate = [], 0
    for _ in range(samples):
        # drawing n battles with replacement = a multinomial draw of how often each distinct outcome recurs
        weights = rng.multinomial(n, share).astype("float64")
        if C is None and not _mle_exists(enc, weights):
            degenerate += 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a degenerate round's line search runs off
            rows.append(
                _fit(enc, weights, scale=scale, base=base, C=C, anchor=anchor, anchor_rating=anchor_rating, start=start)
            )
    boot = pd.DataFrame(rows, columns=enc.models)
    alpha = (1.0 - level) / 2
    lo = pd.Series(np.nanquantile(boot.to_numpy(), alpha, axis=0), index=enc.models)
    hi = pd.Series(np.nanquantile(boot.to_numpy(), 1 - alpha, axis=0), index=enc.models)
    counts = pd.Series(
        (np.bincount(enc.a, enc.count, len(enc.models)) + np.bincount(enc.b, enc.count, len(enc.models))).astype(
            np.int64
        ),
        index=enc.models,
    )
    table = pd.DataFrame(
        {"rating": point, "ci_low": lo, "ci_high": hi, "rank": rank_by_ci(lo, hi), "battles": counts}
    ).loc[point.index]
    table.index.name = "model"
    return ArenaRatings(
        table=table,
        bootstrap=boot,
        degenerate_rounds=degenerate,
        anchor=anchor,
        anchor_rating=anchor_rating,
        samples=samples,
        seed=seed,
        level=level,
    )


# ---------------------------------------------------------------------------------------------------------
# Paired bootstrap
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PairedDiff:
    """Mean difference A − B over shared instances, with a paired bootstrap CI."""

    n: int
    """Number of paired instances."""
    mean_a: float
    """Mean of model A over those instances."""
    mean_b: float
    """Mean of model B over those instances."""
    diff: float
    """mean_a − mean_b (= mean of the per-instance differences)."""
    ci_low: float
    """Lower percentile-bootstrap bound of the difference."""
    ci_high: float
    """Upper bound."""
    includes_zero: bool
    """Whether ci_low ≤ 0 ≤ ci_high, i.e. the data do not separate the two models at this level."""
    samples: int
    """Bootstrap rounds."""
    seed: int
    """Seed of the resampling."""
    level: float
    """Confidence level."""


def _paired_arrays(a, b) -> tuple[np.ndarray, np.ndarray]:
    """Align the two models' values: Series by index (instance ids), which must match exactly so that a
    missing instance is a visible error rather than a silently different sample; arrays by position."""
    if isinstance(a, pd.Series) and isinstance(b, pd.Series):
        if a.index.has_duplicates or b.index.has_duplicates:
            raise ValueError("instance ids must be unique")
        if set(a.index) != set(b.index):
            raise ValueError(f"the two models cover different instances ({len(set(a.index) ^ set(b.index))} differ)")
        b = b.reindex(a.index)
    x, y = np.asarray(a, dtype="float64"), np.asarray(b, dtype="float64")
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"paired values need equal 1-d shapes, got {x.shape} and {y.shape}")
    if np.isnan(x).any() or np.isnan(y).any():
        raise ValueError("paired values contain NaN")
    if x.size == 0:
        raise ValueError("no paired instances")
    return x, y


def paired_bootstrap(a, b, samples: int, seed: int, level: float = 0.95) -> PairedDiff:
    """Mean of A − B with a seeded percentile-bootstrap CI over instances.

    Resampling instances (not each model separately) keeps the pairing, so the shared difficulty of an
    instance cancels and the interval is much tighter than two independent CIs would suggest. Uses the
    same resampler as the leaderboard's per-cell CIs (`metrics.stats.mean_ci`).
    """
    x, y = _paired_arrays(a, b)
    st = mean_ci(x - y, samples=samples, seed=seed, level=level)
    lo, hi = st["ci_low"], st["ci_high"]
    return PairedDiff(
        n=st["n"],
        mean_a=float(x.mean()),
        mean_b=float(y.mean()),
        diff=st["mean"],
        ci_low=lo,
        ci_high=hi,
        includes_zero=bool(lo <= 0.0 <= hi),
        samples=samples,
        seed=seed,
        level=level,
    )
