"""`evaltrail trace`: walk one leaderboard number back to the bytes it came from.

leaderboard -> score summary -> per-instance scores -> completions -> prompts -> raw data ->
sources (URL / wheel) and model weights. Every file is hashed on disk and compared with the pin in
params.yaml and the md5 in dvc.lock; any difference is a failure naming the file.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .. import resources
from ..config import RunConfig
from ..costs import MEASURED
from ..errors import EvaltrailError
from ..hashing import sha256_file
from ..io import read_json
from ..metrics import word_lists
from ..metrics.scoring import score_cell, scores_table
from ..paths import (
    LEADERBOARD_CSV,
    MLFLOW_RUNS_JSON,
    completions_path,
    infer_stats_path,
    model_dir,
    model_info_path,
    model_path,
    prompts_path,
    raw_dir,
    scores_path,
    sources_json,
    summary_path,
)
from ..sources import describe
from .lock import dvc_md5, git_commit, load_lock, recorded_md5


@dataclass
class Trace:
    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def ok(self, text: str) -> None:
        self.lines.append(f"  ok  {text}")

    def bad(self, text: str) -> None:
        self.lines.append(f"  !!  {text}")
        self.problems.append(text)

    def check(self, cond: bool, good: str, fail: str) -> None:
        self.ok(good) if cond else self.bad(fail)


def _artifact(t: Trace, lock: dict, stage: str, path: Path, label: str) -> None:
    """Hash one artifact and compare it with the md5 dvc.lock recorded for `stage`."""
    if not path.exists():
        t.bad(f"{label}: {path} is missing")
        return
    md5, want = dvc_md5(path), recorded_md5(lock, stage, path)
    desc = f"sha256={sha256_file(path)}" if path.is_file() else "directory"
    t.check(
        md5 == want,
        f"{label}: {path} {desc} md5={md5} (= dvc.lock {stage})",
        f"{label}: {path} md5={md5} but dvc.lock {stage} recorded {want}",
    )


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)


# The leaderboard's columns that restate a cell summary's fields (aggregate writes them "%.6f").
BOARD_FIELDS = ("mean", "ci_low", "ci_high", "n")


def _leaderboard_row(scenario: str, model: str, metric: str) -> dict[str, str]:
    """The leaderboard row of one cell's metric, as the strings written in the CSV."""
    if not LEADERBOARD_CSV.is_file():
        raise EvaltrailError(f"{LEADERBOARD_CSV}: missing; run `dvc repro`")
    board = pd.read_csv(LEADERBOARD_CSV, dtype=str, keep_default_na=False)
    hit = board[(board["scenario"] == scenario) & (board["model"] == model) & (board["metric"] == metric)]
    if hit.empty:
        cells = sorted(set(zip(board["scenario"], board["model"], board["metric"])))
        raise EvaltrailError(
            f"{LEADERBOARD_CSV}: no row for {scenario}/{model}/{metric}; rows: " + ", ".join("/".join(c) for c in cells)
        )
    return hit.iloc[0].to_dict()


def _as_written(value) -> str:
    """A summary field as aggregate writes it into leaderboard.csv."""
    if value is None:
        return ""
    return str(value) if isinstance(value, int) else f"{value:.6f}"


def _first_difference(stored, recomputed, where: str = "") -> tuple[str, object, object] | None:
    """The first field (dotted path) where two JSON values differ, with both values."""
    if isinstance(stored, dict) and isinstance(recomputed, dict):
        for key in sorted(set(stored) | set(recomputed)):
            diff = _first_difference(stored.get(key), recomputed.get(key), f"{where}.{key}" if where else key)
            if diff:
                return diff
        return None
    if isinstance(stored, list) and isinstance(recomputed, list) and len(stored) == len(recomputed):
        for i, (a, b) in enumerate(zip(stored, recomputed)):
            if diff := _first_difference(a, b, f"{where}[{i}]"):
                return diff
        return None
    return None if stored == recomputed else (where, stored, recomputed)


def _recompute(t: Trace, run: RunConfig, scenario: str, model: str, stored: dict) -> None:
    """Score the cell again from its prompts and completions (corpus metrics and bootstrap CIs
    included) and require the stored per-instance scores and summary to be exactly that."""
    scores, summary = score_cell(run, scenario, model)
    recomputed = json.loads(json.dumps(summary))  # the JSON the score stage writes, read back
    path = summary_path(scenario, model)
    diff = _first_difference(stored, recomputed)
    t.check(
        diff is None,
        f"summary: {path} equals a recomputation from the completions "
        f"({len(recomputed['metrics'])} metrics, corpus metrics and CIs included)",
        f"summary: {path} field {diff[0]} is {diff[1]!r}, recomputed {diff[2]!r}" if diff else "",
    )
    table = pd.read_parquet(scores_path(scenario, model))
    fresh = scores_table(scores).to_pandas()
    t.check(
        table.equals(fresh),
        f"scores: {scores_path(scenario, model)} equals the recomputed {len(fresh)} per-instance rows",
        f"scores: {scores_path(scenario, model)} differs from the "
        f"recomputed per-instance rows ({len(table)} stored, {len(fresh)} recomputed)",
    )


def trace(run: RunConfig, scenario: str, model: str, metric: str) -> Trace:
    if metric in MEASURED:
        raise EvaltrailError(
            f"trace --metric {metric}: a measurement of the machine, recorded in "
            f"{infer_stats_path(scenario, model)}, not derived from pinned inputs; trace a score instead"
        )
    t, lock = Trace(), load_lock()
    row = _leaderboard_row(scenario, model, metric)
    t.lines.append(f"{scenario} / {model} / {metric} = {row['mean']}")
    _artifact(t, lock, "aggregate", LEADERBOARD_CSV, "leaderboard")

    path = summary_path(scenario, model)
    _artifact(t, lock, f"score@{scenario}-{model}", path, "summary")
    summary = read_json(path)
    if metric not in summary["metrics"]:
        raise EvaltrailError(f"trace --metric {metric}: not in {path}; run `dvc repro`")
    st = summary["metrics"][metric]
    for name in BOARD_FIELDS:
        if _as_written(st.get(name)) != row[name]:
            t.bad(f"leaderboard: {LEADERBOARD_CSV} {metric} {name}={row[name]} but {path} has {st.get(name)}")
    ci = "no CI (a single measurement)" if st["ci_low"] is None else f"95% CI [{st['ci_low']:.6f}, {st['ci_high']:.6f}]"
    t.ok(f"summary: {path} mean={st['mean']:.6f} {ci} n={st['n']} (= the leaderboard row)")

    _artifact(t, lock, f"score@{scenario}-{model}", scores_path(scenario, model), "scores")
    if scores_path(scenario, model).is_file():
        _recompute(t, run, scenario, model, summary)

    _artifact(t, lock, f"infer@{scenario}-{model}", completions_path(scenario, model), "completions")
    if infer_stats_path(scenario, model).is_file():
        cost = read_json(infer_stats_path(scenario, model))
        t.lines.append(
            f"   infer stage, last run: {cost['wall_s']} s wall, peak RSS {cost['peak_rss_mb']} MB, "
            f"{cost['computed']} request(s) computed, {cost['from_cache']} from the request cache"
        )
    _artifact(t, lock, f"prepare@{scenario}", prompts_path(scenario), "prompts")
    _artifact(t, lock, f"fetch@{scenario}", raw_dir(scenario), "raw data")
    _raw_files(t, run, scenario)

    check_model(t, run, lock, model, summary.get("model_sha256"), "completions were made by")

    t.lines.append(f"code: git commit {git_commit(strict=True)}")
    runs = read_json(MLFLOW_RUNS_JSON) if MLFLOW_RUNS_JSON.is_file() else {"runs": {}}
    run_id = runs["runs"].get(f"{scenario}/{model}")
    t.check(
        run_id is not None,
        f"mlflow: run {run_id} in experiment {runs.get('experiment')} at {runs.get('tracking_uri')}",
        f"mlflow: {MLFLOW_RUNS_JSON} has no run for {scenario}/{model}",
    )
    return t


def check_model(t: Trace, run: RunConfig, lock: dict, model: str, used_sha: str | None, used_by: str) -> None:
    """The model directory against dvc.lock, and its weights (or served identity) against the pin
    and the identity `used_sha` recorded in what the model produced."""
    info_path, weights = model_info_path(model), model_path(model)
    _artifact(t, lock, f"fetch_model@{model}", model_dir(model), "model")
    if info_path.is_file() and run.model[model].backend == "openai":
        info = read_json(info_path)
        t.check(
            info["sha256"] == used_sha,
            f"model: served as {info['served']} at {info['base_url']} (identity sha256 {info['sha256']})",
            f"model: {info_path} identity {info['sha256']}, {used_by} {used_sha}",
        )
    elif info_path.is_file() and weights.is_file():
        info, pin, actual = read_json(info_path), run.model[model].weights["sha256"], sha256_file(weights)
        t.check(
            actual == info["sha256"] == pin == used_sha,
            f"model weights: {weights} sha256 {pin} pinned in params.yaml model.{model}.weights; from "
            + ", ".join(describe(p) for p in info["parts"]),
            f"model weights: {weights} sha256 {actual}, {info_path} says {info['sha256']}, params.yaml pins "
            f"{pin}, {used_by} {used_sha}",
        )


def _raw_files(t: Trace, run: RunConfig, scenario: str) -> None:
    """Each raw file against SOURCES.json, and SOURCES.json against the pins in params.yaml."""
    listing = sources_json(scenario)
    if not listing.is_file():
        t.bad(f"raw data: {listing} is missing")
        return
    cfg = run.scenario[scenario]
    pins = {
        s["file"]: s["sha256"] for s in cfg.sources + resources.sources(run.resources, cfg, word_lists(cfg.metrics))
    }
    for rec in read_json(listing):
        path = raw_dir(scenario) / rec["file"]
        actual = sha256_file(path) if path.is_file() else "missing"
        pinned = pins.get(rec["file"])
        t.check(
            actual == rec["sha256"] == pinned,
            f"raw file: {path} sha256={actual} (pinned) <- {describe(rec)} [{rec.get('license', '?')}]",
            f"raw file: {path} sha256={actual}, SOURCES.json says {rec['sha256']}, params.yaml pins {pinned}",
        )


def show_instance(scenario: str, model: str, instance_id: str) -> list[str]:
    """One instance end to end: references, each prompt as sent, its completion, its scores."""
    prompts = pd.read_parquet(prompts_path(scenario))
    rows = prompts[prompts["instance_id"] == instance_id]
    if rows.empty:
        sample_ids = ", ".join(prompts["instance_id"].drop_duplicates().head(3))
        raise EvaltrailError(f"{prompts_path(scenario)}: no instance {instance_id!r} (e.g. {sample_ids})")
    comps = pd.read_parquet(completions_path(scenario, model))
    rows = rows.merge(comps, on="request_id", how="left")
    first = rows.iloc[0]
    lines = [f"instance {instance_id} ({scenario}, split {first['split']}) metadata {first['metadata']}", "references:"]
    lines += [f"  [{'x' if r['correct'] else ' '}] {r['text']}" for r in first["references"]]
    for _, r in rows.iterrows():
        lines.append(f"--- request {r['request_id']} ({r['method']}, trial {r['trial']}) prompt:")
        lines.append(r["prompt"] + (f"<<{r['continuation']}>>" if r["continuation"] is not None else ""))
        shown = repr(r["text"]) if r["text"] is not None else "-"
        lines.append(
            f"--- completion: text={shown} logprob={r['logprob']:.4f} greedy={r['is_greedy']} "
            f"tokens={r['num_prompt_tokens']}+{r['num_output_tokens']}"
        )
    scores = pd.read_parquet(scores_path(scenario, model))
    for _, s in scores[scores["instance_id"] == instance_id].iterrows():
        lines.append(f"score {s['metric']} = {s['value']:.4f} (trial {s['trial']})")
    return lines
