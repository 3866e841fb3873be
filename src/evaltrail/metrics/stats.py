"""Means with seeded percentile-bootstrap 95% confidence intervals."""

from __future__ import annotations

import numpy as np


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
    idx = rng.integers(0, n, size=(samples, n))
    boot = x[idx].mean(axis=1)
    alpha = (1.0 - level) / 2
    lo, hi = np.quantile(boot, [alpha, 1 - alpha])
    return {"n": n, "mean": mean, "ci_low": float(lo), "ci_high": float(hi)}
