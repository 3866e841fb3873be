"""Real workloads for the benchmarks: a scenario's requests and a model backend, built with the
library exactly as the prepare and infer stages build them (sources fetched and verified into a
scratch directory, weights assembled and verified into the evaltrail cache)."""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
from pathlib import Path

import pandas as pd
from common import ROOT

from evaltrail import resources
from evaltrail.adapters import get_adapter
from evaltrail.backends import identity, load_backend
from evaltrail.backends.cache import RequestCache
from evaltrail.backends.infer import run_requests
from evaltrail.backends.weights import materialize, weights_path
from evaltrail.config import RunConfig, run_from_conf
from evaltrail.metrics import word_lists
from evaltrail.paths import cache_dir
from evaltrail.scenarios import get_scenario
from evaltrail.schema import prompts_table
from evaltrail.sources import fetch_dir


def run_config(suite: str = "core", overrides: tuple[str, ...] = ()) -> RunConfig:
    """params.yaml as `dvc exp run -S suite=<suite>` would compose it."""
    return run_from_conf([f"suite={suite}", *overrides], ROOT / "conf")


def requests(run: RunConfig, scenario: str, n: int | None) -> pd.DataFrame:
    """The prompts Parquet rows prepare would write for `scenario`, with `n` sampled instances."""
    cfg = dataclasses.replace(run.scenario[scenario], max_eval_instances=n, perturbations=[])
    loader = get_scenario(scenario)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp)
        fetch_dir(
            loader.sources(cfg) + resources.sources(run.resources, cfg, word_lists(cfg.metrics)),
            raw,
            cache_dir(),
            scenario,
        )
        splits = loader.load(cfg, raw)
        pairs = get_adapter(cfg.method).build(cfg, run, splits, {})
    return prompts_table(pairs).to_pandas()


_WEIGHTS: dict[str, tuple[Path, str]] = {}


def weights(run: RunConfig, model: str) -> tuple[Path, str]:
    """The model's GGUF (assembled and verified once per process, into the cache) and its sha256."""
    if model not in _WEIGHTS:
        model_dir = cache_dir() / "bench" / model
        info = materialize(run.model[model], model_dir, cache_dir())
        _WEIGHTS[model] = weights_path(model_dir), info["sha256"]
    return _WEIGHTS[model]


def backend(run: RunConfig, model: str, **changes):
    """The embedded backend with config `changes` (e.g. prefix_reuse=False)."""
    path, sha = weights(run, model)
    return load_backend(dataclasses.replace(run.model[model], **changes), path, sha)


def timed_infer(b, prompts: pd.DataFrame, desc: str = "infer") -> tuple[float, pd.DataFrame]:
    """The infer stage's loop (`run_requests`, a fresh request cache) over `prompts` with backend
    `b`: wall seconds and the completions."""
    with tempfile.TemporaryDirectory() as tmp:
        cache = RequestCache(Path(tmp) / "requests.sqlite")
        t0 = time.perf_counter()
        table, _ = run_requests(prompts, identity(b.cfg, b.sha256), cache, lambda: b, desc)
        wall = time.perf_counter() - t0
        cache.close()
    return wall, table.to_pandas()


def threads(run: RunConfig, model: str) -> int:
    return run.model[model].n_threads or os.cpu_count() or 1
