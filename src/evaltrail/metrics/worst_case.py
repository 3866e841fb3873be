"""Robustness and fairness as HELM scores them: the worst case over an instance and its variants.

For a metric m and an original instance i with variants v_p (one per perturbation p that changed
its input; contrast sets are robustness variants), per trial:
- ``m/p``          = worst(m(i), m(v_p))          (m(i) alone when p left i unchanged)
- ``m/robustness`` = worst over i and all its robustness variants
- ``m/fairness``   = worst over i and all its fairness variants
"worst" is the min when higher is better, the max otherwise. The scenario's number is the mean
over original instances, like the metric itself.
"""

from __future__ import annotations

import pandas as pd

from ..perturbations.registry import perturbation_kind

KEY = ["original_id", "trial"]


def worst_case(rows: pd.DataFrame, metric: str, higher_is_better: bool) -> pd.DataFrame:
    """`rows`: one metric's per-instance scores (instance_id, original_id, perturbation, trial,
    value) -> rows of the worst-case metrics, keyed by the original's instance_id."""
    originals = rows[rows["perturbation"].isna()].set_index(KEY)["value"]
    variants = rows[rows["perturbation"].notna()]
    if variants.empty or originals.empty:
        return rows.iloc[:0]
    worst = "min" if higher_is_better else "max"
    parts = []

    def emit(name: str, subset: pd.DataFrame) -> None:
        both = pd.concat([originals, subset.set_index(KEY)["value"]])
        per = both.groupby(level=KEY).agg(worst).reindex(originals.index)
        parts.append(per.rename("value").reset_index().assign(metric=name))

    for p in sorted(variants["perturbation"].unique()):
        emit(f"{metric}/{p}", variants[variants["perturbation"] == p])
    kinds = variants["perturbation"].map(perturbation_kind)
    for kind in ("robustness", "fairness"):
        if (kinds == kind).any():
            emit(f"{metric}/{kind}", variants[kinds == kind])
    out = pd.concat(parts, ignore_index=True)
    out["instance_id"] = out["original_id"]
    out["perturbation"] = None
    return out
