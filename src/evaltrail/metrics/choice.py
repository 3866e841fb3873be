"""Separate multiple-choice metrics, vectorized over all instances.

Each function takes the frame of all choice requests (columns: instance_id, trial, choice_index,
logprob, continuation, correct, and calibrated_logprob when the scenario is calibrated) and
returns a Series indexed by (instance_id, trial): 1.0 when the best-scoring option is correct.
Ties break to the lowest choice index.
"""

from __future__ import annotations

import pandas as pd

from . import register

GROUP = ["instance_id", "trial"]


def _pick(frame: pd.DataFrame, score: pd.Series) -> pd.Series:
    ordered = frame.assign(_score=score).sort_values(
        GROUP + ["_score", "choice_index"], ascending=[True] * len(GROUP) + [False, True]
    )
    best = ordered.groupby(GROUP, sort=True).head(1).set_index(GROUP)
    return best["correct"].astype(float)


@register("acc", "choice")
def acc(frame: pd.DataFrame) -> pd.Series:
    """Argmax of the continuation's logprob; for a calibrated scenario, of logprob minus the
    option's logprob after the bare calibration prompt."""
    return _pick(frame, frame["calibrated_logprob"] if "calibrated_logprob" in frame else frame["logprob"])


@register("acc_norm", "choice")
def acc_norm(frame: pd.DataFrame) -> pd.Series:
    """Argmax of logprob divided by the continuation's length in characters (lm-eval's acc_norm)."""
    return _pick(frame, frame["logprob"] / frame["continuation"].str.len())


@register("acc_bytes", "choice")
def acc_bytes(frame: pd.DataFrame) -> pd.Series:
    """Argmax of logprob divided by the continuation's length in UTF-8 bytes."""
    return _pick(frame, frame["logprob"] / frame["continuation"].map(lambda s: len(s.encode("utf-8"))))
