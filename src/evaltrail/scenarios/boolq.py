"""BoolQ (Clark et al. 2019): a yes/no question from a search query about a Wikipedia passage.

Input, as HELM formats it: "{passage}\\nQuestion: {question}?" with the question's first letter
upper-cased. HELM uses str.capitalize(), which also lower-cases the rest; that would mangle the
contrast set's "EEA" or "Grey's Anatomy", so only the first letter changes here. Gold: "Yes"/"No".

The contrast set (Gardner et al. 2020; option `contrast_set`) has 69 validation questions with
human perturbations over the same passage. Every distinct non-empty perturbed question becomes a
validation instance with perturbation="contrast_set" and metadata original_question, original_id
and label_flipped. HELM keeps only the label-flipping ones (the paper's contrast sets include
both kinds); select them by label_flipped. Skipped, not malformed: the first entry (a column
header: title "Title"), blank perturbations, one identical to its original question, and a
repeat of an earlier perturbation of the same question. The contrast file is one JSON document,
so a malformed entry is reported as file:<entry number in "data", from 1>.

Option `answer_choices: [<no>, <yes>]` makes both answers options (the gold flagged), in that
order, for BoolQ scored as a loglikelihood choice (`method: multiple_choice_separate`), as
lm-eval's boolq task does with [" no", " yes"]; without it the one reference is "Yes" or "No".
"""

from __future__ import annotations

import json
from pathlib import Path

from ..config import ScenarioConfig
from ..errors import EvaltrailError
from ..schema import Instance, Reference, make_instance
from . import contrast, register
from .arrow import arrow_rows
from .rows import convert

CONTRAST_FILE = "boolq_perturbed.json"
ANSWERS = {"TRUE": True, "FALSE": False}
"""The contrast file's labels; anything else makes the entry malformed."""
CHOICES = "answer_choices"


def references(cfg: ScenarioConfig, answer: bool) -> list[Reference]:
    """The gold "Yes"/"No", or with `answer_choices` both options, the gold flagged."""
    choices = cfg.options.get(CHOICES)
    if choices is None:
        return [Reference("Yes" if answer else "No", True)]
    if not (isinstance(choices, list) and len(choices) == 2 and all(isinstance(c, str) and c for c in choices)):
        raise EvaltrailError(f"params.yaml: scenario.{cfg.name}.{CHOICES}: expected [<no answer>, <yes answer>]")
    return [Reference(choices[0], not answer), Reference(choices[1], answer)]


def format_input(passage: str, question: str) -> str:
    question = question.strip()
    if not question:
        raise ValueError("empty question")
    return f"{passage}\nQuestion: {question[0].upper()}{question[1:]}?"


def _contrast_entries(path: Path):
    if not path.is_file():
        raise EvaltrailError(f"{path}: missing raw file; run `dvc repro` so fetch materializes it")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))["data"]
    except (ValueError, KeyError, TypeError) as exc:
        raise EvaltrailError(f'{path}: not the contrast-sets JSON ({{"data": [...]}}): {exc}') from None
    return enumerate(data, 1)


def _contrast(cfg: ScenarioConfig, path: Path, originals: dict[str, tuple[Instance, str]]) -> list[Instance]:
    """originals: BoolQ question -> (its instance, its passage)."""

    def make(entry: dict):
        if entry["title"] == "Title":  # the header row of the spreadsheet the JSON came from
            return None
        question = entry["question"]
        if question not in originals:
            raise ValueError(f"question {question!r} is not in BoolQ {cfg.eval_split}")
        original, passage = originals[question]
        if references(cfg, ANSWERS[entry["answer"]]) != list(original.references):
            raise ValueError(f"answer {entry['answer']!r} disagrees with BoolQ for {question!r}")
        made, seen = [], {question}
        for pert in entry["perturbed_questions"]:
            q = pert["perturbed_q"].strip()
            if not q or q in seen:
                continue
            seen.add(q)
            refs = references(cfg, ANSWERS[pert["answer"]])
            meta = {"original_question": question, "label_flipped": refs != list(original.references)}
            inst = make_instance(cfg.eval_split, format_input(passage, q), refs, meta)
            made.append(contrast.mark(inst, original))
        return made

    return convert(cfg, path, _contrast_entries(path), make)


def _select(cfg: ScenarioConfig) -> list[dict]:
    return contrast.sources(cfg, {CONTRAST_FILE})


@register("boolq", options=(contrast.OPTION, CHOICES), select_sources=_select)
def load(cfg: ScenarioConfig, raw: Path) -> dict[str, list]:
    path = raw / f"{cfg.eval_split}.arrow"
    originals: dict[str, tuple[Instance, str]] = {}
    references(cfg, True)  # a bad answer_choices fails here, not as a malformed row

    def make(row: dict):
        if not isinstance(row["answer"], bool):
            raise TypeError(f"answer {row['answer']!r} is not a bool")
        inst = make_instance(
            cfg.eval_split,
            format_input(row["passage"], row["question"]),
            references(cfg, row["answer"]),
        )
        originals[row["question"]] = (inst, row["passage"])
        return inst

    out = convert(cfg, path, arrow_rows(path), make)
    if contrast.enabled(cfg):
        out += _contrast(cfg, raw / CONTRAST_FILE, originals)
    return {cfg.eval_split: out}
