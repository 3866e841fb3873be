"""Joint multiple choice (HELM): all options lettered in one prompt; the model writes the letter.

Format (HELM's): "Question: ...\\nA. ...\\nB. ...\\nAnswer:"; input_noun / output_noun in the
scenario config replace "Question" / "Answer".
"""

from __future__ import annotations

from ..config import RunConfig, ScenarioConfig
from ..schema import Instance, Reference, make_request
from .prompt import header
from .sampling import eval_instances, few_shot

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def format_question(cfg: ScenarioConfig, inst: Instance, answer: bool) -> str:
    lines = [f"{cfg.input_noun or 'Question'}: {inst.input}"]
    lines += [f"{LETTERS[i]}. {c}" for i, c in enumerate(inst.choices)]
    out = f"{cfg.output_noun or 'Answer'}:"
    lines.append(f"{out} {LETTERS[inst.gold_indices[0]]}" if answer else out)
    return "\n".join(lines)


def build_prompt(cfg: ScenarioConfig, inst: Instance, shots: list[Instance]) -> str:
    examples = "".join(format_question(cfg, s, answer=True) + "\n\n" for s in shots)
    return header(cfg, inst) + examples + format_question(cfg, inst, answer=False)


def build(cfg: ScenarioConfig, run: RunConfig, splits: dict[str, list[Instance]]):
    pairs = []
    for inst in eval_instances(cfg, run, splits):
        for trial in range(cfg.num_train_trials):
            shots = few_shot(cfg, run, splits, inst, trial)
            req = make_request(inst.instance_id, trial, "generate", build_prompt(cfg, inst, shots),
                               max_tokens=cfg.max_tokens or 1, stop=tuple(cfg.stop),
                               few_shot_ids=tuple(s.instance_id for s in shots))
            pairs.append((inst, req))
    return pairs


def golds(references: list[Reference]) -> list[str]:
    return [LETTERS[i] for i, r in enumerate(references) if r.correct]
