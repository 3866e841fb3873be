"""End to end with a served model: `dvc exp run` against llama-cpp-python's server on loopback,
which requires an API key; the key (from the environment) appears in no artifact, log or store."""

from __future__ import annotations

import importlib.util
import json
import secrets

import pandas as pd
import pytest

from .conftest import need_url_sources
from .pipeline import dvc, new_workspace
from .servers import llama_server

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        importlib.util.find_spec("fastapi") is None,
        reason="llama-cpp-python[server] is not installed (the test extra installs it)",
    ),
]
KEY = "sk-evaltrail-" + secrets.token_hex(12)  # made at run time: no file of the repo holds it
MODEL = "smollm2_135m_instruct_served"


@pytest.fixture(scope="module")
def run(tmp_path_factory, smollm_gguf):
    need_url_sources("natural_questions")  # suite served_smoke
    repo = tmp_path_factory.mktemp("served")
    with (
        llama_server(smollm_gguf, "smollm2_135m_instruct", api_key=KEY, log=repo.parent / "server.log") as url,
        pytest.MonkeyPatch.context() as mp,
    ):
        mp.setenv("EVALTRAIL_CACHE", str(repo.parent / "cache"))
        mp.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{repo}/mlflow.db")
        mp.setenv("EVALTRAIL_TEST_API_KEY", KEY)
        new_workspace(repo)
        proc = dvc(
            repo,
            "exp",
            "run",
            "-S",
            "suite=served_smoke",
            "-S",
            f"model.{MODEL}.server.base_url={url}",
            "-S",
            f"model.{MODEL}.server.api_key_env=EVALTRAIL_TEST_API_KEY",
        )
        yield repo, url, proc.stdout + proc.stderr


def test_a_served_model_runs_through_the_pipeline(run):
    repo, url, _ = run
    info = json.loads((repo / "models" / MODEL / "model.json").read_text())
    assert info["backend"] == "openai" and info["served"]["id"] == "smollm2_135m_instruct" and info["base_url"] == url
    assert not (repo / "models" / MODEL / "weights.gguf").exists()
    board = pd.read_csv(repo / "results" / "leaderboard.csv")
    row = board[
        (board["scenario"] == "natural_questions") & (board["model"] == MODEL) & (board["metric"] == "f1_score")
    ]
    assert len(row) == 1 and 0 <= row["mean"].iloc[0] <= 1
    completions = pd.read_parquet(repo / "results" / "completions" / "natural_questions" / f"{MODEL}.parquet")
    assert (completions["model_sha256"] == info["sha256"]).all() and completions["text"].notna().all()


def test_the_api_key_is_nowhere_on_disk(run):
    """params.yaml, dvc.lock, MLflow's store and artifacts, data, models, results, the request
    cache and the run's own output: zero occurrences of the key (it only travels in the Authorization header)."""
    repo, _, output = run
    assert KEY not in output
    scanned = [
        p for root in (repo, repo.parent / "cache") for p in root.rglob("*") if p.is_file() and ".git" not in p.parts
    ]
    assert any(p.name == "requests.sqlite" for p in scanned) and any(p.name == "mlflow.db" for p in scanned)
    assert [str(p) for p in scanned if KEY.encode() in p.read_bytes()] == []
    assert "EVALTRAIL_TEST_API_KEY" in (repo / "params.yaml").read_text()  # the variable's name is config


def test_the_server_refuses_requests_without_the_key(run, tmp_path):
    import httpx

    _, url, _ = run
    assert httpx.get(f"{url}/models").status_code == 401
