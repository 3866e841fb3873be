"""End to end: `dvc exp run -S suite=rag` answers NarrativeQA questions from retrieved chunks with the
embedded models, judges Ragas' metrics with the embedded judge and MiniLM embeddings, and puts
them in the leaderboard beside the reference-based F1."""

from __future__ import annotations

import hashlib
import json

import pandas as pd
import pytest
import yaml

from .pipeline import dvc, suite_run

pytestmark = pytest.mark.e2e
SCENARIO = "narrative_qa_rag"
RAG = ("faithfulness", "answer_relevancy", "context_precision", "context_recall")


@pytest.fixture(scope="module")
def rag_repo(tmp_path_factory):
    with suite_run(
        tmp_path_factory.mktemp("rag"), "suite=rag", "max_eval_instances=3", "bootstrap_samples=200"
    ) as repo:
        yield repo


def test_rag_metrics_per_model_with_undefined_counted(rag_repo):
    out = rag_repo / "results" / "rag" / SCENARIO
    params = yaml.safe_load((rag_repo / "params.yaml").read_text())
    summary = json.loads((out / "summary.json").read_text())
    assert sorted(summary) == sorted(params["models"])
    for model, s in summary.items():
        for m in RAG:
            st = s["metrics"][m]
            assert st["n"] + st["undefined"] == 3, (model, m)
            assert st["mean"] is None or 0.0 <= st["mean"] <= 1.0 + 1e-9
    checks = pd.read_parquet(out / "checks.parquet")
    judge = params["rag"][SCENARIO]["judge"]
    assert set(checks["judge_sha256"]) == {params["model"][judge]["weights"]["sha256"]}
    yes_no = checks[checks["metric"] != "answer_relevancy"]
    assert yes_no["yes_logprob"].notna().all() and yes_no["no_logprob"].notna().all()
    assert (checks.loc[checks["metric"].str.startswith("context"), "model"] == "").all()  # judged once per question
    # context metrics rate the retriever: the same for every model
    ctx = {m: s["metrics"]["context_precision"]["mean"] for m, s in summary.items()}
    assert len(set(ctx.values())) == 1


def test_the_rag_scenario_is_in_the_leaderboard_beside_its_f1(rag_repo):
    board = pd.read_csv(rag_repo / "results" / "leaderboard.csv")
    rows = board[board["scenario"] == SCENARIO]
    assert set(RAG) | {"f1_score"} <= set(rows["metric"])
    main = rows[rows["main"]]
    assert set(main["metric"]) == {"f1_score"} and len(main) == 3
    assert "faithfulness" in (rag_repo / "results" / "leaderboard.md").read_text()
    assert dvc(rag_repo, "status").stdout.strip().endswith("Data and pipelines are up to date.")


def test_rerunning_the_rag_stage_gives_identical_bytes(rag_repo):
    out = rag_repo / "results" / "rag" / SCENARIO
    files = ("checks.parquet", "scores.parquet", "summary.json")
    before = {f: hashlib.sha256((out / f).read_bytes()).hexdigest() for f in files}
    dvc(rag_repo, "repro", "-f", "-s", f"rag@{SCENARIO}")
    assert {f: hashlib.sha256((out / f).read_bytes()).hexdigest() for f in files} == before
