"""Beyond one machine: an MLflow tracking server receives the runs, and a DVC remote carries every
output to a second clone that reproduces the leaderboard without running anything."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .pipeline import copy_workspace, dvc, sh, workspace_env
from .servers import answers, free_port, wait_for

pytestmark = pytest.mark.e2e
SMOLLM = "smollm2_135m_instruct"


@pytest.fixture
def mlflow_server(tmp_path):
    """`mlflow server` on loopback with a SQLite backend store and served artifacts."""
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
        "--backend-store-uri",
        f"sqlite:///{tmp_path}/server.db",
        "--artifacts-destination",
        str(tmp_path / "art"),
    ]
    log = open(tmp_path / "server.log", "wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(proc, lambda: answers(f"{url}/health"), "mlflow server", tmp_path / "server.log")
        yield url, tmp_path / "art"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def test_runs_reach_an_mlflow_tracking_server(smoke_repo, tmp_path, mlflow_server):
    import mlflow

    url, art = mlflow_server
    ws = copy_workspace(smoke_repo, tmp_path / "ws")
    with pytest.MonkeyPatch.context() as mp:
        for k, v in workspace_env(ws).items():
            mp.setenv(k, v)
        mp.setenv("MLFLOW_TRACKING_URI", url)
        out = dvc(ws, "repro", "-f", "-s", "aggregate", "report").stdout
    assert "report: logged to MLflow run" in out
    client = mlflow.MlflowClient(tracking_uri=url)
    runs = {r.info.run_name: r for r in client.search_runs([client.get_experiment_by_name("evaltrail").experiment_id])}
    assert set(runs) == {"aggregate", f"mmlu/{SMOLLM}", f"hellaswag/{SMOLLM}"}
    parent = runs["aggregate"].info.run_id
    cell = runs[f"hellaswag/{SMOLLM}"].data
    assert cell.tags["mlflow.parentRunId"] == parent and cell.tags["evaltrail.model_sha256"].startswith("b179c952")
    assert cell.tags["data.sha256.hellaswag/validation.arrow"].startswith("5d21a8cf") and "acc" in cell.metrics
    logged = {a.path for a in client.list_artifacts(parent)}
    assert {"leaderboard.csv", "reproduction.md", "report"} <= logged
    assert any(p.name == "index.html" for p in art.rglob("*"))  # the server stored the report's bytes


def test_dvc_push_then_pull_in_a_second_clone_reproduces_without_running(smoke_repo, tmp_path):
    ws = copy_workspace(smoke_repo, tmp_path / "ws")
    remote = tmp_path / "remote"
    with pytest.MonkeyPatch.context() as mp:
        for k, v in workspace_env(ws).items():
            mp.setenv(k, v)
        dvc(ws, "remote", "add", "-d", "store", str(remote))
        sh(ws, "git", "add", "-A")
        sh(ws, "git", "commit", "-qm", "smoke results and a remote")
        pushed = dvc(ws, "push").stdout
        assert "pushed" in pushed
        clone = tmp_path / "clone"
        sh(tmp_path, "git", "clone", "-q", str(ws), str(clone))
        assert not (clone / "results" / "completions" / "mmlu" / f"{SMOLLM}.parquet").exists()
        assert not (clone / "models" / SMOLLM / "weights.gguf").exists()
        dvc(clone, "pull")
        status = dvc(clone, "status").stdout
        assert "up to date" in status, status
        ran = dvc(clone, "repro").stdout
    assert "Running stage" not in ran
    for f in ("results/leaderboard.csv", f"results/completions/mmlu/{SMOLLM}.parquet", f"models/{SMOLLM}/weights.gguf"):
        assert (clone / f).read_bytes() == (ws / f).read_bytes(), f
    assert os.path.getsize(clone / "models" / SMOLLM / "weights.gguf") > 50_000_000
