"""Separate multiple choice: one loglikelihood request per option, continuation = " " + option."""

from __future__ import annotations

from ..config import RunConfig, ScenarioConfig
from ..schema import Instance, make_request
from .sampling import eval_instances, few_shot


def build_context(inst: Instance, shots: list[Instance]) -> str:
    examples = "".join(f"{s.input} {s.choices[s.gold_indices[0]]}\n\n" for s in shots)
    return examples + inst.input


def build(cfg: ScenarioConfig, run: RunConfig, splits: dict[str, list[Instance]]):
    pairs = []
    for inst in eval_instances(cfg, run, splits):
        shots = few_shot(cfg, run, splits, inst, trial=0)
        context = build_context(inst, shots)
        for i, choice in enumerate(inst.choices):
            pairs.append((inst, make_request(inst.instance_id, 0, "loglikelihood", context,
                                             continuation=" " + choice, choice_index=i,
                                             few_shot_ids=tuple(s.instance_id for s in shots))))
    return pairs
