"""Language modeling: the whole document is scored by rolling loglikelihood (no prompt, no answer).

The backend splits a long document into windows of its context, each token predicted exactly
once; metrics turn the summed logprob into bits per byte and perplexity.
"""

from __future__ import annotations

from ..config import RunConfig, ScenarioConfig
from ..schema import Instance, make_request
from .sampling import eval_instances


def build(cfg: ScenarioConfig, run: RunConfig, splits: dict[str, list[Instance]], resources=None):
    return [
        (inst, make_request(inst.instance_id, 0, "loglikelihood_rolling", inst.input))
        for inst in eval_instances(cfg, run, splits, resources)
    ]
