"""End to end: `dvc exp run -S suite=battle` with the embedded models and the embedded judge, then a
battle rating traced back to verdicts, completions and the judge's weights."""

from __future__ import annotations

import importlib.util
import json
import re
import sys

import pandas as pd
import pytest
import yaml

from .pipeline import copy_workspace, dvc, sh, suite_run
from .servers import llama_server

pytestmark = pytest.mark.e2e
SCENARIO = "best_chatgpt_prompts"
JUDGE = "smollm2_135m_instruct_chat"


@pytest.fixture(scope="module")
def battle_repo(tmp_path_factory):
    with suite_run(
        tmp_path_factory.mktemp("battle"),
        "suite=battle",
        "max_eval_instances=3",
        "bootstrap_samples=200",
        f"scenario.{SCENARIO}.max_tokens=32",
    ) as repo:
        yield repo


def _trace(repo, model, check=True):
    return sh(
        repo,
        sys.executable,
        "-m",
        "evaltrail.cli",
        "trace",
        "--battle",
        "--scenario",
        SCENARIO,
        "--model",
        model,
        check=check,
    )


def test_battle_suite_rates_three_models_from_both_order_verdicts(battle_repo):
    out = battle_repo / "results" / "battles" / SCENARIO
    summary = json.loads((out / "ratings.json").read_text())
    params = yaml.safe_load((battle_repo / "params.yaml").read_text())
    models = sorted(params["models"])
    assert sorted(r["model"] for r in summary["ratings"]) == models == sorted(summary["win_rate"])
    for r in summary["ratings"]:
        assert r["ci_low"] <= r["rating"] <= r["ci_high"] and r["rank"] >= 1 and r["battles"] == 2 * 3
    verdicts = pd.read_parquet(out / "verdicts.parquet")
    assert len(verdicts) == 3 * 3 * 2 and set(verdicts["order"]) == {"ab", "ba"}  # instances x pairs x orders
    pin = params["model"][JUDGE]["weights"]["sha256"]
    assert set(verdicts["judge_sha256"]) == {pin} and verdicts["label_logprobs"].map(len).eq(3).all()
    assert summary["judgements"] == 18 and sum(summary["verdicts"].values()) == 18
    assert "Win rate of the row model" in (out / "ratings.md").read_text()
    assert f"## Battles on {SCENARIO}" in (battle_repo / "results" / "leaderboard.md").read_text()
    page = (battle_repo / "results" / "report" / "index.html").read_text()
    assert 'id="battles"' in page and f"{SCENARIO}: Bradley–Terry ratings" in page
    # each judged answer is a completion of the pipeline, verbatim (cut only beyond max_answer_chars)
    row = verdicts.iloc[0]
    text = (
        pd.read_parquet(battle_repo / "results" / "completions" / SCENARIO / f"{row['model_a']}.parquet")
        .set_index("request_id")
        .loc[row["request_id"], "text"]
        .strip()
    )
    assert text[:200] in row["prompt"]
    assert dvc(battle_repo, "status").stdout.strip().endswith("Data and pipelines are up to date.")


def test_a_rating_traces_to_verdicts_completions_and_judge_weights(battle_repo):
    proc = _trace(battle_repo, "gemma3_270m")
    assert "refit from 18 judgements" in proc.stdout and "all 18 re-derived from these completions" in proc.stdout
    assert f"models/{JUDGE}/weights.gguf sha256" in proc.stdout and "!!" not in proc.stdout


def test_trace_fails_when_an_answer_no_longer_matches_what_was_judged(battle_repo, tmp_path):
    repo = copy_workspace(battle_repo, tmp_path / "copy")
    path = repo / "results" / "completions" / SCENARIO / "gemma3_270m.parquet"
    comp = pd.read_parquet(path)
    comp.loc[0, "text"] = "an answer the judge never saw"
    path.unlink()  # a DVC cache hard link: replace, never write through it
    comp.to_parquet(path, index=False)
    proc = _trace(repo, "gemma3_270m", check=False)
    assert proc.returncode == 1
    assert "verdict(s) judged answers these completions do not give" in proc.stdout
    assert "completions of gemma3_270m" in proc.stdout and "but dvc.lock" in proc.stdout


def test_a_new_judge_prompt_makes_only_the_battle_stale(battle_repo, tmp_path):
    repo = copy_workspace(battle_repo, tmp_path / "copy")
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["battle"][SCENARIO]["template"] += "\nBe brief."
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    status = dvc(repo, "status").stdout
    stale = [line[:-1] for line in status.splitlines() if line and not line[0].isspace()]
    assert stale == ["configure"] and re.search(r"modified: +battle\n", status)  # the top-level key that changed
    dvc(repo, "repro", "configure")  # writes the slices: the stages whose slice changed are stale
    stale = [line[:-1] for line in dvc(repo, "status").stdout.splitlines() if line and not line[0].isspace()]
    assert stale == [f"battle@{SCENARIO}"]


@pytest.mark.skipif(
    importlib.util.find_spec("fastapi") is None,
    reason="llama-cpp-python[server] is not installed (the test extra installs it)",
)
def test_a_served_judge_writes_verdicts_under_its_server_identity(battle_repo, tmp_path, smollm_gguf):
    """The judge may be any backend: here an OpenAI-compatible server, judging the three embedded
    models' answers (the served model itself is listed out of the contestants)."""
    served = "smollm2_135m_instruct_served"
    repo = copy_workspace(battle_repo, tmp_path / "copy")
    with llama_server(smollm_gguf, "smollm2_135m_instruct", log=tmp_path / "server.log") as url:
        dvc(
            repo,
            "exp",
            "run",
            "-S",
            "suite=battle",
            "-S",
            "max_eval_instances=3",
            "-S",
            "bootstrap_samples=200",
            "-S",
            f"scenario.{SCENARIO}.max_tokens=32",
            "-S",
            f"+model@model.{served}={served}",
            "-S",
            f"model.{served}.server.base_url={url}",
            "-S",
            f"battle.{SCENARIO}.judge={served}",
            "-S",
            f"battle.{SCENARIO}.method=generate",
            "-S",
            f"battle.{SCENARIO}.contestants=[gemma3_270m,smollm2_135m_instruct,{JUDGE}]",
        )
    verdicts = pd.read_parquet(repo / "results" / "battles" / SCENARIO / "verdicts.parquet")
    info = json.loads((repo / "models" / served / "model.json").read_text())
    assert set(verdicts["judge"]) == {served} and set(verdicts["judge_sha256"]) == {info["sha256"]}
    assert len(verdicts) == 18 and verdicts["output"].notna().all() and verdicts["label_logprobs"].isna().all()
    summary = json.loads((repo / "results" / "battles" / SCENARIO / "ratings.json").read_text())
    assert summary["method"] == "generate" and sum(summary["verdicts"].values()) == 18
    proc = _trace(repo, "gemma3_270m")
    assert "model: served as" in proc.stdout and "!!" not in proc.stdout
