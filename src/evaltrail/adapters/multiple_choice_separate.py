"""Separate multiple choice: one loglikelihood request per option.

- original: prompt = the query, continuation = " " + option.
- calibrated (`calibration_prompt`, HELM's separate_calibrated): each option is also scored
  after the bare calibration prompt; the option's score is the difference of the two logprobs.
- partial (`partial`, fill-in-the-blank as lm-evaluation-harness scores Winogrande): the input
  holds "_"; per option the prompt is the text before "_" with the option in place, and the
  scored continuation is the text after "_", the same for every option.
"""

from __future__ import annotations

from ..config import RunConfig, ScenarioConfig
from ..errors import EvaltrailError
from ..schema import Instance, make_request
from .prompt import example, header, query
from .sampling import per_trial


def _split_blank(cfg: ScenarioConfig, inst: Instance) -> tuple[str, str]:
    if "_" not in inst.input:
        raise EvaltrailError(f"scenario.{cfg.name}.partial: instance {inst.instance_id} has no '_' blank")
    idx = inst.input.index("_")
    return inst.input[:idx], " " + inst.input[idx + 1 :].strip()


def _requests(cfg: ScenarioConfig, inst: Instance, shots: list[Instance], trial: int):
    ids = tuple(s.instance_id for s in shots)
    if cfg.partial:
        shown = "".join(s.input.replace("_", s.references[s.gold_indices[0]].text, 1) + "\n\n" for s in shots)
        before, after = _split_blank(cfg, inst)
        for i, choice in enumerate(inst.choices):
            yield make_request(
                inst.instance_id,
                trial,
                "loglikelihood",
                header(cfg, inst) + shown + before + choice,
                continuation=after,
                choice_index=i,
                few_shot_ids=ids,
            )
        return
    shown = "".join(example(s, cfg.input_noun, cfg.output_noun) + "\n\n" for s in shots)
    context = header(cfg, inst) + shown + query(inst, cfg.input_noun, cfg.output_noun)
    for i, choice in enumerate(inst.choices):
        yield make_request(
            inst.instance_id,
            trial,
            "loglikelihood",
            context,
            continuation=" " + choice,
            choice_index=i,
            few_shot_ids=ids,
        )
        if cfg.calibration_prompt:
            yield make_request(
                inst.instance_id,
                trial,
                "loglikelihood",
                cfg.calibration_prompt,
                continuation=" " + choice,
                choice_index=i,
                calibration=True,
            )


def build(cfg: ScenarioConfig, run: RunConfig, splits: dict[str, list[Instance]], resources=None):
    return per_trial(cfg, run, splits, resources, _requests)
