"""Efficiency (HELM's family): what each instance cost to run, from the completions' own records.

Each metric sums one completions column over an instance's requests. A cached completion keeps
the runtime measured when it was computed, so these numbers describe the computation, not the
(possibly cached) run that assembled the artifact; the infer stage's own wall time and peak
memory are in results/costs/<scenario>/<model>.json.
"""

from __future__ import annotations

from functools import partial

import pandas as pd

from . import register

GROUP = ["instance_id", "trial"]

# name -> (completions column, higher_is_better, what it is)
USAGE = {
    "runtime_s": ("runtime_s", False, "seconds of model time over the instance's requests"),
    "prompt_tokens": ("num_prompt_tokens", None, "prompt tokens sent (what a naive engine evaluates)"),
    "evaluated_tokens": ("num_evaluated_tokens", False, "prompt tokens actually evaluated (a reused KV prefix is not)"),
    "output_tokens": ("num_output_tokens", None, "tokens generated, or scored for loglikelihood requests"),
}


def per_instance_sum(frame: pd.DataFrame, column: str) -> pd.Series:
    """`column` summed over each (instance, trial)'s requests."""
    return frame.groupby(GROUP, sort=True)[column].sum().astype(float)


for _name, (_column, _hib, _doc) in USAGE.items():
    _fn = partial(per_instance_sum, column=_column)
    _fn.__doc__ = _doc
    register(_name, "usage", higher_is_better=_hib, family="efficiency")(_fn)
