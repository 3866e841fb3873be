"""Means with seeded percentile-bootstrap 95% confidence intervals."""

from __future__ import annotations

import numpy as np

FEW_VALUES = 64
"""Up to this many distinct values, mean_ci resamples value counts instead of instances."""
BLOCK = 4_000_000
"""Values resampled at once (32 MB of float64) when resampling instances."""


def mean_ci(values, samples: int, seed: int, level: float = 0.95) -> dict:
    """Mean of `values` with a percentile-bootstrap CI over instances (deterministic given seed)."""
    x = np.asarray(values, dtype=np.float64)
    n = int(x.size)
    if n == 0:
        return {"n": 0, "mean": None, "ci_low": None, "ci_high": None}
    mean = float(x.mean())
    if n == 1 or samples <= 0:
        return {"n": n, "mean": mean, "ci_low": mean, "ci_high": mean}
    rng = np.random.default_rng(seed)
    values_, counts = np.unique(x, return_counts=True)
    if len(values_) <= FEW_VALUES:
        # few distinct values (0/1 scores, their paired differences): a resample of n instances is a
        # multinomial draw of how often each value recurs; same distribution, O(samples x values)
        boot = rng.multinomial(n, counts / n, size=samples) @ values_ / n
    else:  # index resampling in blocks of rows, so memory stays near BLOCK values
        rows = max(1, BLOCK // n)
        boot = np.concatenate(
            [x[rng.integers(0, n, size=(min(rows, samples - i), n))].mean(axis=1) for i in range(0, samples, rows)]
        )
    alpha = (1.0 - level) / 2
    lo, hi = np.quantile(boot, [alpha, 1 - alpha])
    return {"n": n, "mean": mean, "ci_low": float(lo), "ci_high": float(hi)}


def mean_ci_analytic(values, level: float = 0.95) -> dict:
    """Mean of per-instance scores with an analytic CI: Wilson's score interval when every value
    is 0 or 1 (it stays inside [0, 1] and behaves at 0% and 100%), else Student's t."""
    from scipy import stats

    x = np.asarray(values, dtype=np.float64)
    n = int(x.size)
    if n == 0:
        return {"n": 0, "mean": None, "ci_low": None, "ci_high": None, "ci": None}
    mean = float(x.mean())
    if n == 1:
        return {"n": 1, "mean": mean, "ci_low": mean, "ci_high": mean, "ci": None}
    if np.isin(x, (0.0, 1.0)).all():
        z = float(stats.norm.ppf(0.5 + level / 2))
        denom = 1 + z * z / n
        center = (mean + z * z / (2 * n)) / denom
        half = z * np.sqrt(mean * (1 - mean) / n + z * z / (4 * n * n)) / denom
        # at 0% (100%) the lower (upper) end is exactly 0 (1); rounding would leave it a hair off
        lo = 0.0 if mean == 0.0 else max(0.0, center - half)
        hi = 1.0 if mean == 1.0 else min(1.0, center + half)
        how = "wilson"
    else:
        half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * float(x.std(ddof=1)) / np.sqrt(n)
        lo, hi, how = mean - half, mean + half, "t"
    return {"n": n, "mean": mean, "ci_low": float(lo), "ci_high": float(hi), "ci": how}


def bootstrap_corpus(compute, data: dict, samples: int, seed: int, level: float = 0.95) -> dict[str, dict]:
    """Corpus metrics `compute(data) -> {name: value | None}` over per-instance arrays (first axis
    = instances), with a seeded percentile bootstrap over instances. A resample where a metric is
    undefined is left out of that metric's interval; `n_undefined` counts them."""
    n = int(next(iter(data.values())).shape[0]) if data else 0
    full = compute(data) if n else {}
    out = {
        name: {"n": n, "mean": None if v is None else float(v), "ci_low": None, "ci_high": None, "ci": "bootstrap"}
        for name, v in full.items()
    }
    if n < 2 or samples <= 0:
        for st in out.values():
            st["ci_low"] = st["ci_high"] = st["mean"]
        return out
    rng = np.random.default_rng(seed)
    draws: dict[str, list[float]] = {name: [] for name in full}
    for idx in rng.integers(0, n, size=(samples, n)):
        for name, v in compute({k: a[idx] for k, a in data.items()}).items():
            if v is not None:
                draws[name].append(float(v))
    alpha = (1.0 - level) / 2
    for name, st in out.items():
        if st["mean"] is not None and draws[name]:
            st["ci_low"], st["ci_high"] = (float(q) for q in np.quantile(draws[name], [alpha, 1 - alpha]))
        st["n_undefined"] = samples - len(draws[name])
    return out
