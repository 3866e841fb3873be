"""Joint multiple choice (HELM): all options lettered in one prompt; the model writes the letter.

Besides the generate request, each letter is scored as a continuation of the same prompt (for
original instances), so calibration can use the probability of the chosen letter among the letters.

Format (HELM's): "Question: ...\\nA. ...\\nB. ...\\nAnswer:"; input_noun / output_noun in the
scenario config replace "Question" / "Answer".
"""

from __future__ import annotations

from ..config import RunConfig, ScenarioConfig
from ..schema import Instance, Reference, Request, make_request
from .prompt import header
from .sampling import per_trial

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


def _requests(cfg: ScenarioConfig, inst: Instance, shots: list[Instance], trial: int) -> list[Request]:
    prompt, ids = build_prompt(cfg, inst, shots), tuple(s.instance_id for s in shots)
    out = [
        make_request(
            inst.instance_id,
            trial,
            "generate",
            prompt,
            max_tokens=cfg.max_tokens or 1,
            stop=tuple(cfg.stop),
            few_shot_ids=ids,
        )
    ]
    # Each letter's logprob as the answer: calibration needs the model's probability of its
    # choice among the letters (a shared prompt, so the KV prefix makes these cheap). Only
    # originals: calibration is computed over them, a variant's worst case needs its text.
    if inst.perturbation is None:
        out += [
            make_request(
                inst.instance_id,
                trial,
                "loglikelihood",
                prompt,
                continuation=" " + LETTERS[i],
                choice_index=i,
                few_shot_ids=ids,
            )
            for i in range(len(inst.choices))
        ]
    return out


def build(cfg: ScenarioConfig, run: RunConfig, splits: dict[str, list[Instance]], resources=None):
    return per_trial(cfg, run, splits, resources, _requests)


def parse_letter(text: str | None, n_options: int) -> int | None:
    """The option a generated answer names, or None: HELM maps an output to an option only when
    it is exactly that option's letter (surrounding whitespace aside)."""
    answer = (text or "").strip()
    return LETTERS.index(answer) if len(answer) == 1 and answer in LETTERS[:n_options] else None


def golds(references: list[Reference]) -> list[str]:
    return [LETTERS[i] for i, r in enumerate(references) if r.correct]
