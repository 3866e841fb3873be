"""Efficiency (HELM's family): what each instance cost to run, from the completions' own records.

Each metric sums one completions column over an instance's requests. Token counts follow from
the pinned inputs; seconds, evaluated tokens (what a warm KV cache spared depends on the run's
history) and tokens per second measure the machine. Those MEASURED metrics are computed by the
infer stage into results/costs/<scenario>/<model>.json beside its wall time and peak memory, and
never into results/scores, so a reproduction's scores are byte-identical and its `git diff`
shows only measurements.
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


MEASURED = frozenset({"runtime_s", "evaluated_tokens", "tokens_per_s"})
"""Metrics of the machine and the run's history, not of the model: results/costs, not results/scores."""


def per_instance_sum(frame: pd.DataFrame, column: str) -> pd.Series:
    """`column` summed over each (instance, trial)'s requests."""
    return frame.groupby(GROUP, sort=True)[column].sum().astype(float)


for _name, (_column, _hib, _doc) in USAGE.items():
    _fn = partial(per_instance_sum, column=_column)
    _fn.__doc__ = _doc
    register(_name, "usage", higher_is_better=_hib, family="efficiency")(_fn)
