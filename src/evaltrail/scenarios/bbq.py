"""BBQ (Parrish et al. 2022): does social bias override the context in question answering?

Each row is a context (ambiguous, or disambiguated by a second sentence) and a negative or
non-negative question about two people, one from a stereotyped group, with a third option
"unknown" (right whenever the context is ambiguous). Input "{context} {question}", 3 options.
metadata keeps what BBQ's bias score needs beyond accuracy: category, context_condition,
question_polarity, answer_info, stereotyped_groups, and the option indices derived from them —
unknown_index (answer_info[ansK][1] == "unknown"), target_indices (options whose answer_info
names a stereotyped group, as HELM matches them) and non_target_indices (the rest).
Option `categories` picks which category files to evaluate; only those are fetched.
Upstream Disability_status holds two exact duplicate rows (template versions a and b render
the same text); they share an instance id and sampling keeps one.
"""

from __future__ import annotations

from pathlib import Path

from ..config import ScenarioConfig
from ..schema import Reference, make_instance
from . import register
from .rows import convert, jsonl_rows
from .subsets import chosen, selector

CONDITIONS = ("ambig", "disambig")
POLARITIES = ("neg", "nonneg")


def _category_of(source: dict) -> str:
    return Path(source["file"]).stem


def _categories(cfg: ScenarioConfig) -> list[str]:
    return chosen(cfg, "categories", _category_of, "category")


_select = selector("categories", _category_of, "category")


def option_roles(answer_info: dict, stereotyped_groups: list[str]) -> dict:
    """Which options are "unknown", the stereotyped target, and the non-target."""
    infos = [answer_info[f"ans{i}"] for i in range(3)]
    unknown = [i for i, info in enumerate(infos) if info[1] == "unknown"]
    if len(unknown) != 1:
        raise ValueError(f"expected one 'unknown' option in answer_info, got {answer_info!r}")
    targets = [i for i, info in enumerate(infos) if i != unknown[0] and set(stereotyped_groups) & set(info)]
    others = [i for i in range(3) if i != unknown[0] and i not in targets]
    return {"unknown_index": unknown[0], "target_indices": targets, "non_target_indices": others}


def _make(cfg: ScenarioConfig, category: str):
    def make(row: dict):
        if row["category"] != category:
            raise ValueError(f"category {row['category']!r} in the {category} file")
        if row["context_condition"] not in CONDITIONS or row["question_polarity"] not in POLARITIES:
            raise ValueError(
                f"context_condition/question_polarity {row['context_condition']!r}/"
                f"{row['question_polarity']!r}; valid: {CONDITIONS} / {POLARITIES}"
            )
        label = row["label"]
        if label not in (0, 1, 2) or isinstance(label, bool):
            raise ValueError(f"label {label!r} is not 0, 1 or 2")
        groups = list(row["additional_metadata"]["stereotyped_groups"])
        refs = [Reference(row[f"ans{i}"], i == label) for i in range(3)]
        meta = {
            "category": category,
            "example_id": row["example_id"],
            "question_index": row["question_index"],
            "subcategory": row["additional_metadata"].get("subcategory"),
            "context_condition": row["context_condition"],
            "question_polarity": row["question_polarity"],
            "answer_info": row["answer_info"],
            "stereotyped_groups": groups,
            **option_roles(row["answer_info"], groups),
        }
        return make_instance(cfg.eval_split, f"{row['context'].strip()} {row['question'].strip()}", refs, meta)

    return make


@register("bbq", options=("categories",), select_sources=_select)
def load(cfg: ScenarioConfig, raw: Path) -> dict[str, list]:
    out = []
    for category in _categories(cfg):
        path = raw / f"{category}.jsonl"
        out += convert(cfg, path, jsonl_rows(path), _make(cfg, category))
    return {cfg.eval_split: out}
