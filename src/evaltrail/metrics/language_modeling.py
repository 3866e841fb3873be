"""Language-modeling metrics over rolling loglikelihoods (one row per document).

The frame has columns instance_id, trial, logprob (natural log, summed over every token of the
document), num_output_tokens (tokens scored) and prompt (the document text).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from . import register

GROUP = ["instance_id", "trial"]


def _indexed(frame: pd.DataFrame, values) -> pd.Series:
    return pd.Series(np.asarray(values, dtype=float), index=pd.MultiIndex.from_frame(frame[GROUP]))


@register("bits_per_byte", "lm", higher_is_better=False)
def bits_per_byte(frame: pd.DataFrame) -> pd.Series:
    """-log2 p(document) / UTF-8 bytes of the document: comparable across tokenizers."""
    n_bytes = frame["prompt"].map(lambda s: len(s.encode("utf-8")))
    return _indexed(frame, -frame["logprob"] / math.log(2) / n_bytes)


@register("perplexity", "lm", higher_is_better=False)
def perplexity(frame: pd.DataFrame) -> pd.Series:
    """exp(-logprob / tokens): token-level, so it depends on the model's tokenizer."""
    return _indexed(frame, np.exp(-frame["logprob"] / frame["num_output_tokens"]))
