"""Each stage's slice of params.yaml: the params contract, written once.

DVC parses the whole params file once for every stage that declares a key of it, and looks each
key up by walking the whole tree, so a 125-stage pipeline over a 54 kB params.yaml spent most of a
no-op `dvc repro` there. Instead, one stage (`configure`) reads params.yaml, validates all of it,
and writes for every other stage the keys that stage reads, and nothing else, to
data/params/<stage>/<unit>.json. A stage depends on its slice as a file and reads only that slice:
a params change re-runs exactly the stages whose slice it changes, and a stage that reads a key it
does not declare fails naming the key, instead of silently escaping DVC's tracking.
"""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from typing import Any, Iterator

from .config import RunConfig, parse_params
from .errors import EvaltrailError
from .paths import PARAMS_SLICES, params_slice_path

STAGE_PARAMS: dict[str, tuple[str, ...]] = {
    "build_engine": ("engine",),
    "fetch": ("scenario.{scenario}", "resources"),
    "fetch_model": ("model.{model}",),
    "prepare": ("seed", "max_eval_instances", "scenario.{scenario}", "resources"),
    "infer": ("model.{model}",),  # what a request says comes from its prompts file, not from params
    "score": ("seed", "bootstrap_samples", "scenario.{scenario}", "resources"),
    "battle": ("seed", "bootstrap_samples", "models", "battle.{key}", "model.{judge}"),
    "rag": ("models", "rag.{key}", "model.{judge}"),
    "refusal": ("seed", "bootstrap_samples", "models", "refusal.{key}", "model.{judge}"),
    "aggregate": (
        "seed",
        "max_eval_instances",
        "bootstrap_samples",
        "scenarios",
        "models",
        "scenario",
        "model",
        "mlflow",
        "reproduce",
        "battle_scenarios",
        "rag_scenarios",
        "refusal_scenarios",
    ),
    "report": ("scenarios", "models", "battle_scenarios", "refusal_scenarios", "scenario", "model"),
}
"""Stage -> the params keys it reads ({scenario}, {model}, {key}, {judge}: its unit). The only home
of this list: dvc.yaml names each stage's slice file, and tests check the two agree."""


class Undeclared:
    """A params value that a stage's slice does not hold: any use of it fails, naming the key."""

    def __init__(self, key: str, stage: str):
        self._msg = (
            f"stage {stage} reads params key {key!r}, which its slice does not hold; add it to "
            f"STAGE_PARAMS[{stage!r}] in src/evaltrail/stage_params.py"
        )

    def _fail(self, *_args: Any, **_kwargs: Any):
        raise EvaltrailError(self._msg)

    __getattr__ = __getitem__ = __iter__ = __len__ = __bool__ = __int__ = __index__ = __float__ = _fail
    __contains__ = __eq__ = __lt__ = __add__ = __call__ = __str__ = __format__ = _fail
    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return "<undeclared>"


def units(raw: dict) -> Iterator[tuple[str, str | None, dict[str, str]]]:
    """(stage, unit, placeholders) of every stage dvc.yaml builds from this params, in DAG order;
    unit is DVC's stage-name suffix (infer@<scenario>-<model>), None for a single stage."""
    scenarios, models = list(raw.get("scenarios") or []), list(raw.get("models") or [])
    yield "build_engine", None, {}
    for s in scenarios:
        yield "fetch", s, {"scenario": s}
    for m in models:
        yield "fetch_model", m, {"model": m}
    for s in scenarios:
        yield "prepare", s, {"scenario": s}
    for stage in ("infer", "score"):
        for s, m in itertools.product(scenarios, models):
            yield stage, f"{s}-{m}", {"scenario": s, "model": m}
    for group in ("battle", "rag", "refusal"):
        for key, cfg in sorted((raw.get(group) or {}).items()):
            yield group, key, {"key": key, "judge": cfg["judge"]}
    yield "aggregate", None, {}
    yield "report", None, {}


def slice_of(raw: dict, stage: str, placeholders: dict[str, str]) -> dict:
    """The keys `stage` reads, copied from `raw`; a key absent from raw stays absent (its default)."""
    declares = [p.format(**placeholders) for p in STAGE_PARAMS[stage]]
    params: dict = {}
    for dotted in declares:
        *parents, leaf = dotted.split(".")
        src, dst = raw, params
        for part in parents:
            src, dst = (src or {}).get(part), dst.setdefault(part, {})
        if isinstance(src, dict) and leaf in src:
            dst[leaf] = src[leaf]
    return {"stage": stage, "declares": declares, "params": params}


def write_slices(raw: dict, out_dir: Path) -> int:
    """Every stage's slice under `out_dir` (a fresh directory); returns how many."""
    from .io import write_json

    n = 0
    for stage, unit, placeholders in units(raw):
        write_json(
            out_dir / params_slice_path(stage, unit).relative_to(PARAMS_SLICES), slice_of(raw, stage, placeholders)
        )
        n += 1
    return n


_FILLER = {"seed": 0, "max_eval_instances": None, "bootstrap_samples": 1, "scenarios": [], "models": [], "mlflow": {}}
"""Placeholders that let a slice without these required keys parse; replaced by Undeclared."""


def load_stage_params(stage: str, unit: str | None = None) -> RunConfig:
    """The run config as `stage` may see it: its slice's keys, every other top-level key Undeclared."""
    from .io import read_json

    path = params_slice_path(stage, unit)
    if not PARAMS_SLICES.is_dir():
        raise EvaltrailError(
            f"{PARAMS_SLICES}/: missing; the configure stage writes it from params.yaml "
            f"(`dvc repro configure`, or the whole pipeline with `dvc repro`)"
        )
    if not path.is_file():
        valid = sorted(p.stem for p in path.parent.glob("*.json"))
        raise EvaltrailError(
            f"{stage} {unit!r} is not a stage of params.yaml (no {path}); valid: "
            f"{', '.join(valid) or '(none)'}; add it to the suite and re-run configure"
        )
    data = read_json(path)
    tops = {d.split(".")[0] for d in data["declares"]}
    raw = {**{k: v for k, v in _FILLER.items() if k not in tops}, **data["params"]}
    run = parse_params(raw, str(path), whole=False)
    return dataclasses.replace(
        run, **{f.name: Undeclared(f.name, stage) for f in dataclasses.fields(RunConfig) if f.name not in tops}
    )
