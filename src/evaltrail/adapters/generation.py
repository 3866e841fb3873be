"""Generation: the model writes the answer (greedy); every correct reference counts as gold."""

from __future__ import annotations

from ..config import RunConfig, ScenarioConfig
from ..schema import Instance, Reference, Request, make_request
from .prompt import example, header, query
from .sampling import per_trial


def build_prompt(cfg: ScenarioConfig, inst: Instance, shots: list[Instance]) -> str:
    shown = "".join(example(s, cfg.input_noun, cfg.output_noun) + "\n\n" for s in shots)
    return header(cfg, inst) + shown + query(inst, cfg.input_noun, cfg.output_noun)


def _requests(cfg: ScenarioConfig, inst: Instance, shots: list[Instance], trial: int) -> list[Request]:
    return [
        make_request(
            inst.instance_id,
            trial,
            "generate",
            build_prompt(cfg, inst, shots),
            max_tokens=cfg.max_tokens or 1,
            stop=tuple(cfg.stop),
            few_shot_ids=tuple(s.instance_id for s in shots),
        )
    ]


def build(cfg: ScenarioConfig, run: RunConfig, splits: dict[str, list[Instance]], resources=None):
    return per_trial(cfg, run, splits, resources, _requests)


def golds(references: list[Reference]) -> list[str]:
    return [r.text for r in references if r.correct]
