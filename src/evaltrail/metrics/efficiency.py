"""Efficiency (HELM's family), the part that follows from pinned inputs: tokens per instance.

Each metric sums one completions column over an instance's requests. Seconds, tokens actually
evaluated (what a warm KV cache spared depends on the run's history) and tokens per second measure
the machine: evaltrail.costs records them beside infer's wall time and memory, never in scores, so
a reproduction's scores are byte-identical and its `git diff` shows only measurements.
"""

from __future__ import annotations

from functools import partial

import pandas as pd

from .registry import GROUP, register

# name -> (completions column, higher_is_better, what it is)
USAGE = {
    "prompt_tokens": ("num_prompt_tokens", None, "prompt tokens sent (what a naive engine evaluates)"),
    "output_tokens": ("num_output_tokens", None, "tokens generated, or scored for loglikelihood requests"),
}


def per_instance_sum(frame: pd.DataFrame, column: str) -> pd.Series:
    """`column` summed over each (instance, trial)'s requests."""
    return frame.groupby(GROUP, sort=True)[column].sum().astype(float)


for _name, (_column, _hib, _doc) in USAGE.items():
    _fn = partial(per_instance_sum, column=_column)
    _fn.__doc__ = _doc
    register(_name, "usage", higher_is_better=_hib, family="efficiency")(_fn)
