"""Joint multiple choice (HELM): all options lettered in one prompt; the model writes the letter."""

from __future__ import annotations

from ..config import RunConfig, ScenarioConfig
from ..schema import Instance, Reference, make_request
from .sampling import eval_instances, few_shot

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def format_question(inst: Instance, answer: bool) -> str:
    lines = [f"Question: {inst.input}"]
    lines += [f"{LETTERS[i]}. {c}" for i, c in enumerate(inst.choices)]
    lines.append("Answer: " + LETTERS[inst.gold_indices[0]] if answer else "Answer:")
    return "\n".join(lines)


def build_prompt(cfg: ScenarioConfig, inst: Instance, shots: list[Instance]) -> str:
    header = cfg.instructions.format(**inst.metadata) + "\n\n" if cfg.instructions else ""
    examples = "".join(format_question(s, answer=True) + "\n\n" for s in shots)
    return header + examples + format_question(inst, answer=False)


def build(cfg: ScenarioConfig, run: RunConfig, splits: dict[str, list[Instance]]):
    pairs = []
    for inst in eval_instances(cfg, run, splits):
        shots = few_shot(cfg, run, splits, inst, trial=0)
        req = make_request(inst.instance_id, 0, "generate", build_prompt(cfg, inst, shots),
                           max_tokens=cfg.max_tokens or 1, stop=tuple(cfg.stop),
                           few_shot_ids=tuple(s.instance_id for s in shots))
        pairs.append((inst, req))
    return pairs


def golds(references: list[Reference]) -> list[str]:
    return [LETTERS[i] for i, r in enumerate(references) if r.correct]
