"""HELM's "grammar" of real-world instructions (best_chatgpt_prompts.yaml, shipped in crfm-helm).

The file is a small grammar: rules map a category to expansions, and an expansion may name other
categories as ${Category}. Every expansion of `Root` is expanded in full (all combinations, in file
order) into one instruction; the tags of the Root rule it came from (personal, email, ...) become
its `tag` metadata. There are no references: the answers are judged pairwise (the battle stage).
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import yaml

from ..config import ScenarioConfig
from ..errors import EvaltrailError
from ..schema import make_instance
from . import register
from .rows import _require

_SLOT = re.compile(r"\$\{(\w+)\}")


def expand(text: str, rules: dict[str, list[str]], where: str, depth: int = 0) -> list[str]:
    """Every string `text` derives to, replacing its slots left to right (order: as in the file)."""
    hit = _SLOT.search(text)
    if hit is None:
        return [text]
    if depth > 20:
        raise EvaltrailError(f"{where}: ${{{hit.group(1)}}} expands into itself; the grammar must terminate")
    if hit.group(1) not in rules:
        raise EvaltrailError(f"{where}: ${{{hit.group(1)}}} names no category of the grammar")
    out = []
    for option in rules[hit.group(1)]:
        out += expand(text[: hit.start()] + option + text[hit.end() :], rules, where, depth + 1)
    return out


def instructions(path: Path) -> list[tuple[str, str]]:
    """(instruction, tag) for every expansion of the Root rules, duplicates dropped."""
    with open(_require(path), encoding="utf-8") as f:
        grammar = yaml.safe_load(f) or {}
    rules: dict[str, list[str]] = defaultdict(list)
    roots = []
    for rule in grammar.get("rules") or []:
        texts = [str(e["text"]) for e in rule.get("expansions") or []]
        rules[rule["category"]] += texts
        if rule["category"] == "Root":
            roots += [(t, ",".join(rule.get("tags") or [])) for t in texts]
    if not roots:
        raise EvaltrailError(f"{path}: no Root rule; not a HELM grammar file")
    seen, out = set(), []
    for text, tag in roots:
        for inst in expand(text, rules, str(path)):
            if inst not in seen:
                seen.add(inst)
                out.append((inst.strip(), tag))
    return out


@register("best_chatgpt_prompts")
def load(cfg: ScenarioConfig, raw: Path) -> dict[str, list]:
    path = raw / cfg.sources[0]["file"]
    return {cfg.eval_split: [make_instance(cfg.eval_split, text, [], {"tag": tag}) for text, tag in instructions(path)]}
