"""Separate multiple-choice metrics, vectorized over all instances.

Each function takes the frame of all choice requests (columns: group key columns, choice_index,
logprob, continuation, correct) and returns a Series indexed by the group keys: 1.0 when the
highest-scoring option is a correct one. Ties break to the lowest choice index.
"""

from __future__ import annotations

import pandas as pd

from . import register

GROUP = ["instance_id", "trial"]


def _pick(frame: pd.DataFrame, score: pd.Series) -> pd.Series:
    ordered = frame.assign(_score=score).sort_values(GROUP + ["_score", "choice_index"],
                                                      ascending=[True] * len(GROUP) + [False, True])
    best = ordered.groupby(GROUP, sort=True).head(1).set_index(GROUP)
    return best["correct"].astype(float)


@register("acc", "choice")
def acc(frame: pd.DataFrame) -> pd.Series:
    """Argmax of the summed continuation logprob."""
    return _pick(frame, frame["logprob"])


@register("acc_norm", "choice")
def acc_norm(frame: pd.DataFrame) -> pd.Series:
    """Argmax of logprob divided by the continuation's length in characters (lm-eval's acc_norm)."""
    return _pick(frame, frame["logprob"] / frame["continuation"].str.len())
