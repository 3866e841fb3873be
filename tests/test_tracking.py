"""MLflow logging on a real SQLite store: lineage tags, artifacts, and no duplicate runs."""

from __future__ import annotations

import mlflow
import pytest

from evaltrail.tracking import log_cell, shown_uri


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return uri


def test_one_run_per_unchanged_cell(store, tmp_path):
    art = tmp_path / "scores.parquet"
    art.write_bytes(b"PAR1")
    summary = {"main_metric": "acc", "metrics": {"acc": {"mean": 0.5, "ci_low": 0.4, "ci_high": 0.6, "n": 9}}}
    tags = {"evaltrail.git_commit": "abc", "evaltrail.model_sha256": "f" * 64, "data.sha256.s/x.arrow": "e" * 64}
    config = {"seed": 0, "scenario": {"sources": [{"file": "x" * 600}], "metrics": ["acc"]}}
    run_id, created = log_cell("exp", "s/m", config, summary, tags, [art])
    again, created_again = log_cell("exp", "s/m", config, summary, {**tags, "evaltrail.git_commit": "def"}, [art])
    assert created and not created_again and again == run_id
    changed, created_changed = log_cell("exp", "s/m", config, {**summary, "main_metric": "x"}, tags, [art])
    assert created_changed and changed != run_id

    run = mlflow.get_run(run_id)
    assert run.data.tags["evaltrail.model_sha256"] == "f" * 64
    assert run.data.tags["data.sha256.s/x.arrow"] == "e" * 64
    assert run.data.metrics == {"acc": 0.5, "acc_ci_low": 0.4, "acc_ci_high": 0.6}
    assert run.data.params["scenario.metrics"] == "['acc']" and "scenario.sources" not in run.data.params
    names = {a.path for a in mlflow.MlflowClient().list_artifacts(run_id)}
    assert {"scores.parquet", "config.json"} <= names


def test_credentials_never_shown():
    assert shown_uri("https://user:secret@mlflow.example/") == "https://***@mlflow.example/"
    assert shown_uri("sqlite:///mlflow.db") == "sqlite:///mlflow.db"
    assert (
        shown_uri("https://host/v1?api_key=s3cr3t&n=1&access_token=t0k#x")
        == "https://host/v1?api_key=***&n=1&access_token=***#x"
    )


def test_a_served_models_url_is_logged_without_credentials(store):
    url = "https://user:secret@llm.example/v1?key=k3y"
    config = {"seed": 0, "model": {"backend": "openai", "server": {"base_url": url, "extra_body": {"top_k": 1}}}}
    summary = {"main_metric": "acc", "metrics": {"acc": {"mean": 0.5, "ci_low": 0.4, "ci_high": 0.6, "n": 9}}}
    run_id, _ = log_cell("exp", "s/served", config, summary, {"evaltrail.model_sha256": "e" * 64}, [])
    run = mlflow.get_run(run_id)
    assert run.data.params["model.server.base_url"] == "https://***@llm.example/v1?key=***"
    logged = mlflow.artifacts.load_dict(f"{run.info.artifact_uri}/config.json")
    assert logged["model"]["server"] == {"base_url": "https://***@llm.example/v1?key=***", "extra_body": {"top_k": 1}}
    assert "secret" not in repr(run.data) and "k3y" not in repr(run.data)
    assert config["model"]["server"]["base_url"] == url  # the caller's config is left as it was


def test_a_served_models_run_says_its_weights_are_unverified(in_tmp):
    from evaltrail.io import write_json
    from evaltrail.paths import model_info_path, sources_json
    from evaltrail.tracking.lineage import cell_tags

    write_json(sources_json("s"), [])
    write_json(
        model_info_path("served"),
        {"backend": "openai", "sha256": "e" * 64, "sha256_of": "served (the server's identity; no weights)"},
    )
    write_json(model_info_path("local"), {"backend": "llama_cpp", "sha256": "f" * 64})
    tags = {m: cell_tags({}, "s", m, {"model_sha256": "e" * 64}, "abc") for m in ("served", "local")}
    assert tags["served"]["evaltrail.model_sha256_of"] == "served (the server's identity; no weights)"
    assert "evaltrail.model_sha256_of" not in tags["local"]  # weights hashed by the client: tags as before


def test_cells_nest_under_the_aggregate_run(store, tmp_path):
    import pandas as pd

    from evaltrail.tracking import PARENT_TAG, log_parent

    art = tmp_path / "leaderboard.csv"
    art.write_text("scenario,model\n")
    board = pd.DataFrame([{"scenario": "s", "model": "m", "metric": "acc", "mean": 0.5}])
    parent = log_parent("exp", board, "abc", [art])
    assert log_parent("exp", board, "def", [art]) == parent  # unchanged leaderboard: same parent
    summary = {"main_metric": "acc", "metrics": {"acc": {"mean": 0.5, "ci_low": 0.4, "ci_high": 0.6, "n": 9}}}
    child, _ = log_cell("exp", "s/m", {"seed": 0}, summary, {"evaltrail.model_sha256": "f" * 64}, [art], parent=parent)
    assert mlflow.get_run(child).data.tags[PARENT_TAG] == parent
    new_parent = log_parent("exp", board.assign(mean=0.6), "abc", [art])
    kept, created = log_cell(
        "exp", "s/m", {"seed": 0}, summary, {"evaltrail.model_sha256": "f" * 64}, [art], parent=new_parent
    )
    assert kept == child and not created and mlflow.get_run(child).data.tags[PARENT_TAG] == new_parent
    assert "leaderboard.csv" in {a.path for a in mlflow.MlflowClient().list_artifacts(parent)}


def test_attach_adds_files_to_a_known_run_and_declines_an_unknown_one(store, tmp_path):
    """A fresh clone's committed mlflow_runs.json names a run of another store: no crash."""
    import pandas as pd

    from evaltrail.tracking import attach, log_parent

    report = tmp_path / "report"
    report.mkdir()
    (report / "index.html").write_text("<html></html>")
    parent = log_parent("exp", pd.DataFrame([{"scenario": "s", "model": "m", "metric": "acc", "mean": 0.5}]), "abc", [])
    assert attach(parent, report, "report")
    assert [a.path for a in mlflow.MlflowClient().list_artifacts(parent, "report")] == ["report/index.html"]
    assert not attach("0" * 32, report, "report")
