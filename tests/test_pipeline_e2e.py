"""End to end: the real DVC pipeline on the smoke suite (real data, real SmolLM2), in a temp copy."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pandas as pd
import pytest

from .pipeline import copy_workspace, dvc, sh, trace, workspace_env

pytestmark = pytest.mark.e2e
SMOLLM = "smollm2_135m_instruct"
# A few rows of each family the smoke suite yields (mmlu carries HELM's robustness/fairness variants)
CELLS = {
    ("mmlu", SMOLLM, "exact_match"),
    ("mmlu", SMOLLM, "exact_match/robustness"),
    ("mmlu", SMOLLM, "exact_match/fairness"),
    ("mmlu", SMOLLM, "ece_10_bin"),
    ("mmlu", SMOLLM, "output_tokens"),
    ("hellaswag", SMOLLM, "acc"),
    ("hellaswag", SMOLLM, "acc_norm"),
    ("hellaswag", SMOLLM, "selective_acc_at_10"),
    ("hellaswag", SMOLLM, "prompt_tokens"),
}  # seconds are measurements (results/costs), not on the board


@pytest.fixture(scope="module")
def repo(smoke_repo):
    """The session's smoke workspace, in its environment; tests here restore what they change."""
    with pytest.MonkeyPatch.context() as mp:
        for k, v in workspace_env(smoke_repo).items():
            mp.setenv(k, v)
        yield smoke_repo


def board(repo: Path) -> pd.DataFrame:
    return pd.read_csv(repo / "results" / "leaderboard.csv")


def test_leaderboard_has_every_family_in_range(repo):
    lb = board(repo)
    assert CELLS <= set(zip(lb["scenario"], lb["model"], lb["metric"]))
    assert set(lb["family"]) == {"accuracy", "calibration", "robustness", "fairness", "efficiency"}
    bounded = lb[lb["family"].isin(["accuracy", "calibration", "robustness", "fairness"])]
    assert bounded["mean"].between(0, 1).all()
    assert lb["ci_low"].le(lb["mean"] + 1e-12).all() and lb["mean"].le(lb["ci_high"] + 1e-12).all()
    assert (lb["n"] == 6).all()  # worst cases and corpus metrics count the original instances
    assert lb[lb["main"]].groupby("scenario")["metric"].first().to_dict() == {
        "hellaswag": "acc_norm",
        "mmlu": "exact_match",
    }
    # a worst case is never better than the metric itself
    em = lb[lb["scenario"] == "mmlu"].set_index("metric")["mean"]
    assert em["exact_match/robustness"] <= em["exact_match"] and em["exact_match/fairness"] <= em["exact_match"]
    metrics = json.loads((repo / "results" / "metrics.json").read_text())
    assert set(metrics) == {"mmlu", "hellaswag"}
    prepared = json.loads((repo / "data" / "prompts" / "mmlu.json").read_text())
    assert prepared["variants"]["mild_mix"] == 6  # mild_mix changes every question
    cost = json.loads((repo / "results" / "costs" / "mmlu" / f"{SMOLLM}.json").read_text())
    assert cost["requests"] == prepared["requests"] and cost["peak_rss_mb"] > 0
    assert cost["cpu_kernels"].startswith("CPU :")  # which llama.cpp kernels computed these answers
    shown = sh(repo, sys.executable, "-m", "evaltrail.cli", "costs").stdout  # names the CPU that measured it
    assert cost["cpu"].endswith(" logical cores") and shown.startswith(f"Measured on: {cost['cpu']}.")
    assert cost["identity"]["engine"]["profile"] == "x86_64_avx2"  # the pinned engine's
    measured = cost["measured"]  # measurements live here, never in scores or the leaderboard
    assert measured["prompt_tokens"] >= measured["evaluated_tokens"] > 0 and measured["tokens_per_s"] > 0
    assert not {"runtime_s", "tokens_per_s", "evaluated_tokens"} & set(lb["metric"])


def test_family_tables_pairwise_and_plots(repo):
    fams = json.loads((repo / "results" / "leaderboard_families.json").read_text())
    assert [f["family"] for f in fams] == ["accuracy", "calibration", "robustness", "fairness", "efficiency"]
    acc = fams[0]
    assert acc["columns"] == ["hellaswag: acc_norm", "mmlu: exact_match"]
    assert acc["rows"][0]["mean_win_rate"] is None  # one model: nothing to beat
    pair = json.loads((repo / "results" / "pairwise.json").read_text())
    assert pair["ratings"] == [] and pair["differences"] == []  # one model: no pairs
    for name in ("accuracy_vs_tokens.csv", "reliability.csv", "mmlu_subjects.csv"):
        assert len(pd.read_csv(repo / "results" / "plots" / name)) > 0, name
    assert dvc(repo, "plots", "show", "-o", str(repo.parent / "plots")).returncode == 0
    report = repo / "results" / "report"
    assert (report / "index.html").is_file() and (report / "data" / "mmlu.js").is_file()


def test_trace_every_cell(repo):
    for scenario, model, metric in sorted(CELLS):
        out = trace(repo, scenario, model, metric).stdout
        assert "!!" not in out and "mlflow: run" in out and "sha256=" in out
    assert "equals a recomputation from the completions" in trace(repo, "mmlu", SMOLLM, "ece_10_bin").stdout
    timed = trace(repo, "mmlu", SMOLLM, "runtime_s", check=False)  # a measurement: one line naming its file
    assert timed.returncode == 1 and "Traceback" not in timed.stderr
    assert f"a measurement of the machine, recorded in results/costs/mmlu/{SMOLLM}.json" in timed.stderr
    # the perturbation word lists are pinned raw files of the scenario, so a trace reaches them
    assert "resources/correct_to_misspelling.json" in trace(repo, "mmlu", SMOLLM, "exact_match/robustness").stdout
    iid = pd.read_parquet(repo / "results/scores/mmlu" / f"{SMOLLM}.parquet")["instance_id"].iloc[0]
    shown = sh(
        repo, sys.executable, "-m", "evaltrail.cli", "trace", "--scenario", "mmlu", "--model", SMOLLM, "--instance", iid
    ).stdout
    assert f"instance {iid}" in shown and "Answer:" in shown and "score exact_match" in shown


def test_mlflow_holds_one_run_per_cell_with_lineage(repo):
    import mlflow

    mlflow.set_tracking_uri(os.environ["MLFLOW_TRACKING_URI"])
    runs = mlflow.search_runs(experiment_names=["evaltrail"], output_format="list")
    assert sorted(r.info.run_name for r in runs) == ["aggregate", "hellaswag/" + SMOLLM, "mmlu/" + SMOLLM]
    parent = json.loads((repo / "results" / "mlflow_runs.json").read_text())["parent"]
    assert {r.info.run_name: r.info.run_id for r in runs}["aggregate"] == parent
    assert all(r.data.tags.get("mlflow.parentRunId") == parent for r in runs if r.info.run_name != "aggregate")
    client = mlflow.MlflowClient()
    logged = {a.path for a in client.list_artifacts(parent)}
    assert {"leaderboard.csv", "leaderboard.md", "reproduction.md", "report"} <= logged
    assert "report/index.html" in {a.path for a in client.list_artifacts(parent, "report")}
    tags = {r.info.run_name: r.data.tags for r in runs}["hellaswag/" + SMOLLM]
    assert tags["evaltrail.model_sha256"] == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    assert tags["data.sha256.hellaswag/validation.arrow"].startswith("5d21a8cf")
    assert len(tags["evaltrail.git_commit"]) >= 40
    assert all(v != "unrecorded" for k, v in tags.items() if k.startswith("dvc.md5."))


def test_second_repro_runs_nothing_and_aggregate_rerun_adds_no_runs(repo):
    out = dvc(repo, "repro").stdout
    assert "Running stage" not in out and "up to date" in out
    forced = dvc(repo, "repro", "-f", "-s", "aggregate").stdout
    assert forced.count("unchanged, kept") == 2 and "(logged)" not in forced
    import mlflow

    mlflow.set_tracking_uri(os.environ["MLFLOW_TRACKING_URI"])
    assert len(mlflow.search_runs(experiment_names=["evaltrail"], output_format="list")) == 3  # parent + 2 cells


def test_artifacts_are_byte_identical_when_recomputed(repo):
    before = dvc(repo, "status").stdout
    dvc(repo, "repro", "-f", "-s", "prepare@mmlu", "infer@mmlu-" + SMOLLM, "score@hellaswag-" + SMOLLM)
    assert "changed" not in dvc(repo, "status").stdout, before


def test_changing_metric_code_reruns_scoring_not_inference(repo):
    code = repo / "src" / "evaltrail" / "metrics" / "accuracy.py"
    original = code.read_text()
    code.write_text(original + "\n# an edit to metric code\n")
    try:
        status = dvc(repo, "status").stdout
        assert "score@mmlu-" + SMOLLM in status and "infer@" not in status and "prepare@" not in status
        ran = dvc(repo, "repro").stdout
        assert "Running stage 'score@mmlu-" in ran and "Running stage 'infer@" not in ran
    finally:
        code.write_text(original)
        dvc(repo, "repro")


def test_bad_pin_fails_clearly_and_keeps_earlier_results(repo):
    params = repo / "params.yaml"
    original = params.read_text()
    raw = repo / "data" / "raw" / "hellaswag" / "validation.arrow"
    raw_before, board_before = raw.read_bytes(), (repo / "results" / "leaderboard.csv").read_text()
    params.write_text(original.replace("5d21a8cf3f95280f2916128ed480c6b518a11aacb18b1ea200eefd8c0b92c16b", "ab" * 32))
    try:
        proc = dvc(repo, "repro", check=False)
        assert proc.returncode != 0
        assert f"expected {'ab' * 32}, got 5d21a8cf" in proc.stderr + proc.stdout
        assert raw.read_bytes() == raw_before
        assert (repo / "results" / "leaderboard.csv").read_text() == board_before
    finally:
        params.write_text(original)
        ran = dvc(repo, "repro").stdout
    # configure had written the bad pin's slices; restored, it alone runs (fetch never recorded the bad pin)
    assert [ln for ln in ran.splitlines() if ln.startswith("Running stage")] == ["Running stage 'configure':"]


def test_editing_a_raw_file_makes_trace_fail(repo):
    raw = repo / "data" / "raw" / "mmlu" / "abstract_algebra" / "test.arrow"
    data = raw.read_bytes()
    raw.chmod(0o644)
    raw.write_bytes(data + b"\0")
    try:
        proc = trace(repo, "mmlu", SMOLLM, "exact_match", check=False)
        assert proc.returncode == 1
        assert "data/raw/mmlu" in proc.stderr and "error: trace failed" in proc.stderr
    finally:
        raw.write_bytes(data)
    assert trace(repo, "mmlu", SMOLLM, "exact_match").returncode == 0


def _edit_board(ws: Path, scenario: str, metric: str, **fields: str) -> None:
    path = ws / "results" / "leaderboard.csv"
    lb = pd.read_csv(path, dtype=str, keep_default_na=False)
    at = (lb["scenario"] == scenario) & (lb["model"] == SMOLLM) & (lb["metric"] == metric)
    for k, v in fields.items():
        lb.loc[at, k] = v
    path.write_text(lb.to_csv(index=False))


def _forge_ece(ws: Path) -> None:
    """The probe: ECE 0.01 written into both the leaderboard and the cell's summary."""
    _edit_board(ws, "mmlu", "ece_10_bin", mean="0.010000")
    path = ws / "results" / "scores" / "mmlu" / f"{SMOLLM}.json"
    summary = json.loads(path.read_text())
    summary["metrics"]["ece_10_bin"]["mean"] = 0.01
    path.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")


def _forge_completions(ws: Path) -> None:
    """The probe: every hellaswag loglikelihood edited, and dvc.lock's md5 updated to match."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from evaltrail.provenance.lock import dvc_md5

    sh(ws, "git", "add", "-f", "dvc.lock")  # a committed lock, as in a published clone
    sh(ws, "git", "commit", "-qm", "lock")
    path = ws / "results" / "completions" / "hellaswag" / f"{SMOLLM}.parquet"
    old = dvc_md5(path)
    table = pq.read_table(path)
    at = table.schema.get_field_index("logprob")
    table = table.set_column(at, table.schema.field(at), pa.array([-1.0] * len(table)))
    path.chmod(0o644)
    pq.write_table(table, path, compression="zstd")
    lock = ws / "dvc.lock"
    lock.write_text(lock.read_text().replace(old, dvc_md5(path)))


FORGERIES = {  # probe -> (edit, cell traced, what the trace must name)
    "ECE forged in leaderboard and summary": (
        _forge_ece,
        ("mmlu", "ece_10_bin"),
        r"summary: results/scores/mmlu/.*json field metrics.ece_10_bin.mean is 0.01, recomputed 0\.\d+",
    ),
    "acc_norm CI forged in the leaderboard": (
        lambda ws: _edit_board(ws, "hellaswag", "acc_norm", ci_low="0.000100"),
        ("hellaswag", "acc_norm"),
        r"leaderboard: results/leaderboard.csv acc_norm ci_low=0.000100 but .* has 0\.\d+",
    ),
    "completions edited, dvc.lock updated": (
        _forge_completions,
        ("hellaswag", "acc_norm"),
        r"summary: results/scores/hellaswag/.*json field metrics\.\S+ is .*, recomputed",
    ),
}


@pytest.mark.parametrize("probe", FORGERIES)
def test_trace_fails_on_forged_numbers(probe, smoke_repo, tmp_path, monkeypatch):
    import re

    ws = copy_workspace(smoke_repo, tmp_path / "ws")
    for k, v in workspace_env(ws).items():
        monkeypatch.setenv(k, v)
    edit, (scenario, metric), expected = FORGERIES[probe]
    edit(ws)
    proc = trace(ws, scenario, SMOLLM, metric, check=False)
    assert proc.returncode == 1, proc.stdout
    assert re.search(expected, proc.stdout), proc.stdout
    assert proc.stderr.startswith("error: trace failed: ") and len(proc.stderr.strip().splitlines()) == 1
    if probe.startswith("completions"):
        assert "+dirty" in proc.stdout  # the commit line owns up to the edited dvc.lock
