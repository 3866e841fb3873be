"""Generic loaders: a scenario over a plain JSONL, CSV or Parquet file is one conf, no Python.

A conf picks one with `loader:` (lm-eval's task YAML is the model):
- ``multiple_choice``: a question, its options, and the answer as a 0-based index or as the
  text of one option.
- ``generation``: an input and one or more references (a string or a list of strings).

Each split is one pinned source whose file is named ``<split>.jsonl``, ``<split>.csv`` or
``<split>.parquet``; `columns` maps the roles above to the file's column names (the defaults are
the role names), and `id` names an optional column kept as metadata. `strip_prefix` removes a
fixed prefix from every input (files that bake "Question: " into the question, as
llm-foundry's do, while the conf's input_noun adds it again).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Callable, Iterator

import pyarrow.parquet as pq

from ..config import ScenarioConfig
from ..errors import EvaltrailError
from ..schema import Instance, Reference, make_instance
from . import register
from .rows import _require, convert, jsonl_rows

ROLES = {
    "multiple_choice": ("input", "choices", "answer"),
    "generation": ("input", "references"),
}
"""Each generic loader's column roles, all required."""

OPTIONS = ("columns", "id", "strip_prefix")


def _csv_rows(path: Path) -> Iterator[tuple[int, object]]:
    with open(_require(path), encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        for row in reader:
            yield reader.line_num, row


def _parquet_rows(path: Path) -> Iterator[tuple[int, object]]:
    try:
        table = pq.read_table(_require(path))
    except (OSError, ValueError) as exc:
        raise EvaltrailError(f"{path}: not a readable Parquet file ({exc}); re-fetch it") from None
    return enumerate(table.to_pylist(), 1)


READERS: dict[str, Callable[[Path], Iterator[tuple[int, object]]]] = {
    ".jsonl": jsonl_rows,
    ".csv": _csv_rows,
    ".parquet": _parquet_rows,
}


def split_file(cfg: ScenarioConfig, raw: Path, split: str) -> Path:
    """The source file of `split`: the one whose name is <split>.<jsonl|csv|parquet>."""
    names = [s["file"] for s in cfg.sources if Path(s["file"]).stem == split and Path(s["file"]).suffix in READERS]
    if len(names) != 1:
        raise EvaltrailError(
            f"params.yaml: scenario.{cfg.name}.sources: the {cfg.loader} loader reads split {split!r} from one "
            f"file named {split}.jsonl, {split}.csv or {split}.parquet; found {names or 'none'}"
        )
    return raw / names[0]


def _columns(cfg: ScenarioConfig, loader: str) -> dict[str, str]:
    given = cfg.options.get("columns") or {}
    where = f"params.yaml: scenario.{cfg.name}.columns"
    if not isinstance(given, dict) or any(not isinstance(v, str) for v in given.values()):
        raise EvaltrailError(f"{where}: expected a mapping of role -> column name")
    unknown = sorted(set(given) - set(ROLES[loader]))
    if unknown:
        raise EvaltrailError(
            f"{where}.{unknown[0]}: not a role of the {loader} loader; roles: {', '.join(ROLES[loader])}"
        )
    return {role: given.get(role, role) for role in ROLES[loader]}


def _field(row: dict, column: str, role: str):
    if column not in row:
        raise KeyError(f"no column {column!r} (the {role}); columns: {', '.join(sorted(row))}")
    return row[column]


def _text(value, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{what} must be non-empty text, got {value!r}")
    return value


def _input(cfg: ScenarioConfig, row: dict, column: str) -> str:
    text = _text(_field(row, column, "input"), f"input {column!r}")
    prefix = cfg.options.get("strip_prefix")
    if prefix and text.startswith(prefix):
        text = text[len(prefix) :]
    return text


def _listed(value, what: str) -> list[str]:
    """A list of strings; CSV cells holding a JSON list are parsed (CSV has no lists)."""
    if isinstance(value, str) and value.lstrip().startswith("["):
        value = json.loads(value)
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{what} must be a string or a non-empty list of strings, got {value!r}")
    return value


def _choice_references(choices: list[str], answer) -> list[Reference]:
    if len(choices) < 2:
        raise ValueError(f"needs at least 2 choices, got {len(choices)}")
    if isinstance(answer, str) and answer.strip().lstrip("-").isdigit() and answer not in choices:
        answer = int(answer)  # CSV cells are text
    if isinstance(answer, bool) or not isinstance(answer, (int, str)):
        raise ValueError(f"answer must be a choice index or a choice's text, got {answer!r}")
    if isinstance(answer, int):
        if not 0 <= answer < len(choices):
            raise ValueError(f"answer index {answer} is outside the {len(choices)} choices (0-based)")
        gold = choices[answer]
    elif answer in choices:
        gold = answer
    else:
        raise ValueError(f"answer {answer!r} is not one of the choices {choices!r}")
    return [Reference(c, c == gold) for c in choices]


def _instance(cfg: ScenarioConfig, loader: str, cols: dict[str, str], split: str, row) -> Instance:
    if not isinstance(row, dict):
        raise ValueError(f"expected an object with named fields, got {type(row).__name__}")
    text = _input(cfg, row, cols["input"])
    if loader == "multiple_choice":
        choices = [_text(c, "each choice") for c in _listed(_field(row, cols["choices"], "choices"), "choices")]
        refs = _choice_references(choices, _field(row, cols["answer"], "answer"))
    else:
        golds = _listed(_field(row, cols["references"], "references"), "references")
        refs = [Reference(_text(g, "each reference"), True) for g in golds]
    key = cfg.options.get("id")
    meta = {"id": str(_field(row, key, "id"))} if key else {}
    return make_instance(split, text, refs, meta)


def _loader(loader: str):
    def load(cfg: ScenarioConfig, raw: Path) -> dict[str, list[Instance]]:
        cols = _columns(cfg, loader)
        out: dict[str, list[Instance]] = {}
        for split in dict.fromkeys([cfg.eval_split, cfg.train_split]):
            if split:
                path = split_file(cfg, raw, split)
                rows = READERS[path.suffix](path)
                out[split] = convert(cfg, path, rows, lambda row, s=split: _instance(cfg, loader, cols, s, row))
        return out

    return load


for _name in ROLES:
    register(_name, OPTIONS, generic=True)(_loader(_name))
