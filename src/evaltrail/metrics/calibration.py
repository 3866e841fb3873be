"""Calibration metrics with HELM's semantics (crfm-helm 0.5.16 ``compute_calibration_metrics``,
which calls the uncertainty-calibration 0.1.4 package), and multiple-choice confidences.

Inputs, one value per instance: ``probs``, the model's probability of its predicted answer, in
[0, 1]; ``correct``, 1 when that prediction was right, else 0. With n instances:

- ``ece(probs, correct, num_bins)`` (HELM's ``ece_10_bin`` = ``get_ece_em(num_bins=10)``):
  sort the probs and cut them into ``min(num_bins, n)`` runs of near-equal size
  (``numpy.array_split``: the first ``n % bins`` runs are one longer); each boundary is the
  midpoint between the last prob of a run and the first of the next, the last is 1.0, duplicates
  dropped. A prob goes to the first bin whose upper boundary is >= it (so under ties a prob equal
  to a boundary falls in the lower bin and bins need not hold equal counts). ECE = sum over bins
  of (bin size / n) * |mean prob - accuracy| = (1/n) * sum over bins |sum(prob - correct)|.
  HELM's ``ece_1_bin`` (``get_ece(num_bins=1)``, equal-width) is the same single bin:
  |mean prob - accuracy|.
- ``selective_cov_acc_area``: order instances by prob, highest first; acc_k = accuracy of the
  first k; the area is the mean of acc_1..acc_n.
- ``selective_acc_at(coverage=0.1)`` (HELM's ``selective_acc@10``): acc_k for
  k = int(coverage * n) + 1, i.e. HELM's ``accs[int(0.1 * n)]`` (one more than 10%).

Deviation: HELM orders with ``np.argsort(-probs)``, numpy's unstable default sort, so the order
of tied probs -- and with it both selective metrics -- depends on numpy's version and the CPU's
SIMD sort. Here ties keep input order (a stable sort); without ties the results are HELM's.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .accuracy import choice_rows, pick_correct
from .registry import GROUP, Arrays, Context, corpus, wide

MIN_RELIABLE_N = 300
"""HELM: about 300 instances are needed for ece_10_bin to be reliable."""

METRIC_NAMES = ("ece_10_bin", "ece_1_bin", "selective_cov_acc_area", "selective_acc@10")


def is_reliable(n: int) -> bool:
    """Whether n instances are enough for the calibration metrics (callers warn when not)."""
    return n >= MIN_RELIABLE_N


def _arrays(probs, correct) -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(probs, dtype=float).ravel()
    c = np.asarray(correct, dtype=float).ravel()
    if p.shape != c.shape:
        raise ValueError(f"probs and correct differ in length: {p.size} != {c.size}")
    if not np.all((p >= 0) & (p <= 1)):  # also rejects NaN
        raise ValueError("probs must lie in [0, 1]")
    if not np.all((c == 0) | (c == 1)):
        raise ValueError("correct must be 0 or 1")
    return p, c


def equal_mass_edges(probs, num_bins: int) -> np.ndarray:
    """Upper bin boundaries as uncertainty-calibration's ``get_equal_bins`` draws them."""
    runs = np.array_split(np.sort(np.asarray(probs, dtype=float)), min(num_bins, len(probs)))
    mids = [(a[-1] + b[0]) / 2.0 for a, b in zip(runs, runs[1:])]
    return np.unique(mids + [1.0])


def ece(probs, correct, num_bins: int = 10) -> float | None:
    """Expected calibration error (L1) over equal-mass bins; None when there are no instances."""
    p, c = _arrays(probs, correct)
    if p.size == 0:
        return None
    if num_bins < 1:
        raise ValueError("num_bins must be >= 1")
    edges = equal_mass_edges(p, num_bins)
    bin_of = np.searchsorted(edges, p)  # side="left": the first boundary >= p
    gaps = np.bincount(bin_of, weights=p - c, minlength=edges.size)
    return float(np.abs(gaps).sum() / p.size)


def _top_k_accuracies(p: np.ndarray, c: np.ndarray) -> np.ndarray:
    """acc_k, k = 1..n: accuracy of the k most confident instances (ties in input order)."""
    order = np.argsort(-p, kind="stable")
    return np.cumsum(c[order]) / np.arange(1, p.size + 1)


def selective_cov_acc_area(probs, correct) -> float | None:
    """Area under the coverage-accuracy curve: the mean over k of acc_k; None when empty."""
    p, c = _arrays(probs, correct)
    return float(_top_k_accuracies(p, c).mean()) if p.size else None


def selective_acc_at(probs, correct, coverage: float = 0.1) -> float | None:
    """HELM's selective_acc@10 for coverage 0.1: acc_k at k = int(coverage * n) + 1; None if empty."""
    if not 0 <= coverage < 1:
        raise ValueError("coverage must lie in [0, 1)")
    p, c = _arrays(probs, correct)
    if p.size == 0:
        return None
    return float(_top_k_accuracies(p, c)[min(int(coverage * p.size), p.size - 1)])


def calibration_metrics(probs, correct) -> dict[str, float | None]:
    """HELM's four calibration metrics; all None when there are no instances."""
    values = (
        ece(probs, correct, 10),
        ece(probs, correct, 1),
        selective_cov_acc_area(probs, correct),
        selective_acc_at(probs, correct, 0.1),
    )
    return dict(zip(METRIC_NAMES, values))


def reliability(probs, correct, num_bins: int = 10) -> list[dict]:
    """The reliability diagram behind ece_10_bin: per equal-mass bin, the mean confidence, the
    accuracy and the count (bins assigned as `ece` assigns them)."""
    p, c = _arrays(probs, correct)
    if p.size == 0:
        return []
    which = np.searchsorted(equal_mass_edges(p, num_bins), p, side="left")
    return [
        {
            "bin": int(b),
            "confidence": float(p[which == b].mean()),
            "accuracy": float(c[which == b].mean()),
            "n": int((which == b).sum()),
        }
        for b in np.unique(which)
    ]


# --- the calibration corpus group: confidences of multiple-choice picks -------------------------


def choice_confidence(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (instance, trial): the probability the model gives its top choice (softmax over the
    choices' scores: calibrated logprob when the scenario is calibrated, else logprob; for joint
    multiple choice the choices are the answer letters) and whether that choice is correct."""
    score = rows["calibrated_logprob"] if "calibrated_logprob" in rows else rows["logprob"]
    top = score.groupby([rows[k] for k in GROUP]).transform("max")
    mass = np.exp(score - top).groupby([rows[k] for k in GROUP]).sum()
    return pd.DataFrame({"prob": 1.0 / mass, "correct": pick_correct(rows, score)})


def _calibration_inputs(frame: pd.DataFrame, ctx: Context) -> Arrays | None:
    rows = choice_rows(frame)
    if rows.empty:
        return None
    conf = choice_confidence(rows)
    return {"prob": wide(conf, "prob"), "correct": wide(conf, "correct")}


@corpus(
    "calibration",
    {
        "ece_10_bin": (False, "calibration"),
        "ece_1_bin": (False, "calibration"),
        "selective_cov_acc_area": (True, "calibration"),
        "selective_acc_at_10": (True, "calibration"),
    },
    _calibration_inputs,
)
def _calibration(a: Arrays) -> dict[str, float | None]:
    out = calibration_metrics(a["prob"].ravel(), a["correct"].ravel())
    out["selective_acc_at_10"] = out.pop("selective_acc@10")  # HELM's name; "@" is not a valid MLflow metric name
    return out
