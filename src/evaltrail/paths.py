"""Where every artifact lives. dvc.yaml declares the same paths; nothing else reads or writes."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "EVALTRAIL_CACHE"


PARAMS_SLICES = Path("data/params")
"""The configure stage's output: each stage's slice of params.yaml (evaltrail.stage_params)."""


def params_slice_path(stage: str, unit: str | None = None) -> Path:
    return PARAMS_SLICES / f"{stage}.json" if unit is None else PARAMS_SLICES / stage / f"{unit}.json"


def raw_dir(scenario: str) -> Path:
    return Path("data/raw") / scenario


def sources_json(scenario: str) -> Path:
    return raw_dir(scenario) / "SOURCES.json"


def prompts_path(scenario: str) -> Path:
    return Path("data/prompts") / f"{scenario}.parquet"


def prepare_report_path(scenario: str) -> Path:
    """What prepare loaded, sampled and skipped (malformed rows, per raw file)."""
    return Path("data/prompts") / f"{scenario}.json"


def engine_dir() -> Path:
    """build_engine's output: the llama.cpp libraries, their Python bindings and engine.json."""
    return Path("engine/build")


ENGINE_JSON = Path("engine/engine.json")
"""The engine's identity (libraries' sha256, profile, compiler): what every infer stage depends on."""


def model_dir(model: str) -> Path:
    """fetch_model's output: what the model is (model.json) and, for embedded backends, its weights."""
    return Path("models") / model


def model_path(model: str) -> Path:
    """Embedded weights (llama_cpp); served models have none."""
    return model_dir(model) / "weights.gguf"


def model_info_path(model: str) -> Path:
    return model_dir(model) / "model.json"


def completions_path(scenario: str, model: str) -> Path:
    return Path("results/completions") / scenario / f"{model}.parquet"


def infer_stats_path(scenario: str, model: str) -> Path:
    """What the infer stage itself cost: wall time, peak memory, requests computed vs cached."""
    return Path("results/costs") / scenario / f"{model}.json"


def scores_path(scenario: str, model: str) -> Path:
    return Path("results/scores") / scenario / f"{model}.parquet"


def summary_path(scenario: str, model: str) -> Path:
    return Path("results/scores") / scenario / f"{model}.json"


def verify_path(scenario: str, model: str) -> Path:
    """The cell's last `evaltrail verify`: a measurement on one machine, committed but no DVC output."""
    return Path("results/verify") / scenario / f"{model}.json"


def battle_dir(scenario: str) -> Path:
    """The battle stage's output for one scenario (dvc.yaml declares the directory)."""
    return Path("results/battles") / scenario


def battle_verdicts_path(scenario: str) -> Path:
    """Every judged pair: the judge's raw output and its verdict."""
    return battle_dir(scenario) / "verdicts.parquet"


def battle_ratings_path(scenario: str) -> Path:
    return battle_dir(scenario) / "ratings.json"


def battle_ratings_md(scenario: str) -> Path:
    return battle_dir(scenario) / "ratings.md"


def rag_dir(scenario: str) -> Path:
    """The rag stage's output for one scenario (dvc.yaml declares the directory)."""
    return Path("results/rag") / scenario


def rag_checks_path(scenario: str) -> Path:
    """Every judge check with its raw output."""
    return rag_dir(scenario) / "checks.parquet"


def rag_scores_path(scenario: str) -> Path:
    return rag_dir(scenario) / "scores.parquet"


def rag_summary_path(scenario: str) -> Path:
    return rag_dir(scenario) / "summary.json"


def refusal_dir(scenario: str) -> Path:
    """The refusal stage's output for one scenario (dvc.yaml declares the directory)."""
    return Path("results/refusal") / scenario


def refusal_judgements_path(scenario: str) -> Path:
    """Every judged answer (the run's models' and the human-labelled ones): label logprobs, label."""
    return refusal_dir(scenario) / "judgements.parquet"


def refusal_summary_path(scenario: str) -> Path:
    return refusal_dir(scenario) / "summary.json"


RESULTS = Path("results")
LEADERBOARD_CSV = RESULTS / "leaderboard.csv"
LEADERBOARD_MD = RESULTS / "leaderboard.md"
LEADERBOARD_JSON = RESULTS / "leaderboard.json"
METRICS_JSON = RESULTS / "metrics.json"
MLFLOW_RUNS_JSON = RESULTS / "mlflow_runs.json"
FAMILIES_JSON = RESULTS / "leaderboard_families.json"
PAIRWISE_JSON = RESULTS / "pairwise.json"
REPRODUCTION_MD = RESULTS / "reproduction.md"
REPRODUCTION_JSON = RESULTS / "reproduction.json"
PLOTS = RESULTS / "plots"
REPORT = RESULTS / "report"


ENGINE_CACHE_ENV = "EVALTRAIL_ENGINE_CACHE"


def engine_cache_dir() -> Path:
    """Compiled engines, the pinned sdist and zig's own libc++ builds: per machine, shared by every
    workspace and request cache (a build takes minutes). Override with EVALTRAIL_ENGINE_CACHE."""
    return Path(os.environ.get(ENGINE_CACHE_ENV) or Path.home() / ".cache" / "evaltrail-engine")


def cache_dir() -> Path:
    """Downloaded wheels and the request cache. Never part of a result: every entry is keyed by
    content hashes, so a cold cache recomputes the same numbers. Override with EVALTRAIL_CACHE."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "evaltrail")


REQUEST_CACHE = "requests.sqlite"
"""The request cache's file name inside a cache directory."""


def request_cache_path() -> Path:
    """The request cache infer and the judges read and fill."""
    return cache_dir() / REQUEST_CACHE
