"""Your own data in one conf: `file` sources and the generic multiple-choice and generation loaders."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from evaltrail.catalog import check_scenario
from evaltrail.config import build_scenario
from evaltrail.errors import EvaltrailError
from evaltrail.scenarios import get_scenario, loader_of
from evaltrail.sources import fetch_dir

QUIZ = [
    {"q": "Which planet is known as the red planet?", "opts": ["Venus", "Mars", "Jupiter"], "key": 1},
    {"q": "What do bees make?", "opts": ["honey", "silk", "wax paper"], "key": "honey"},
    {"q": "How many legs has a spider?", "opts": ["six", "eight"], "key": 1},
    {"q": "Which gas do plants take in?", "opts": ["oxygen", "carbon dioxide", "helium"], "key": 1},
    {"q": "Water freezes at how many degrees Celsius?", "opts": ["0", "100", "-40"], "key": 0},
    {"q": "Which is a mammal?", "opts": ["shark", "dolphin", "trout"], "key": "dolphin"},
]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def mc_conf(data: Path, **extra) -> dict:
    return {
        "method": "multiple_choice_separate",
        "loader": "multiple_choice",
        "columns": {"input": "q", "choices": "opts", "answer": "key"},
        "eval_split": "test",
        "input_noun": "Question",
        "output_noun": "Answer",
        "metrics": ["acc"],
        "main_metric": "acc",
        "license": "CC0-1.0",
        "taxonomy": {"group": "knowledge", "task": "question answering", "domain": "trivia", "language": "English"},
        "sources": [{"file": f"test{data.suffix}", "kind": "file", "path": str(data), "sha256": sha(data)}],
        **extra,
    }


def load(conf: dict, tmp_path: Path, name: str = "my_quiz") -> dict:
    cfg = build_scenario(conf, f"conf/scenario/{name}.yaml", name)
    loader = loader_of(cfg)
    loader.check(cfg)
    raw = tmp_path / "raw"
    fetch_dir(loader.sources(cfg), raw, tmp_path / "cache", "sources")
    return loader.load(cfg, raw)


def test_jsonl_multiple_choice_by_index_or_text(tmp_path):
    [*insts] = load(mc_conf(write_jsonl(tmp_path / "quiz.jsonl", QUIZ)), tmp_path)["test"]
    assert [i.input for i in insts] == [r["q"] for r in QUIZ]
    assert [[r.text for r in i.references] for i in insts] == [r["opts"] for r in QUIZ]
    assert [i.gold_indices for i in insts] == [(1,), (0,), (1,), (1,), (0,), (1,)]
    again = load(mc_conf(write_jsonl(tmp_path / "other" / "quiz.jsonl", QUIZ[::-1])), tmp_path / "other")
    assert sorted(i.instance_id for i in again["test"]) == sorted(i.instance_id for i in insts)  # content ids


def test_csv_and_parquet_generation_with_one_or_many_references(tmp_path):
    rows = pd.DataFrame({"prompt": ["2+2=", "Capital of France?"], "gold": [["4", "four"], ["Paris"]]})
    rows.to_parquet(tmp_path / "gen.parquet")
    conf = {
        **mc_conf(tmp_path / "gen.parquet"),
        "method": "generation",
        "loader": "generation",
        "columns": {"input": "prompt", "references": "gold"},
        "metrics": ["exact_match"],
        "main_metric": "exact_match",
    }
    [a, b] = load(conf, tmp_path)["test"]
    assert (a.input, [r.text for r in a.references], b.gold_indices) == ("2+2=", ["4", "four"], (0,))
    csv = tmp_path / "c" / "gen.csv"
    csv.parent.mkdir()
    csv.write_text('prompt,gold\n"Say ""hi""",hi\nList,"[""a"", ""b""]"\n', encoding="utf-8")
    conf = {**conf, "sources": [{"file": "test.csv", "kind": "file", "path": str(csv), "sha256": sha(csv)}]}
    [c, d] = load(conf, tmp_path / "c")["test"]
    assert (c.input, [r.text for r in c.references], [r.text for r in d.references]) == ('Say "hi"', ["hi"], ["a", "b"])


def test_strip_prefix_and_id_column(tmp_path):
    rows = [{"query": "Question: Why?", "choices": ["a", "b"], "gold": 0, "uid": 7}]
    conf = mc_conf(write_jsonl(tmp_path / "x.jsonl", rows), columns={"input": "query", "answer": "gold"})
    [inst] = load({**conf, "strip_prefix": "Question: ", "id": "uid"}, tmp_path)["test"]
    assert (inst.input, inst.metadata) == ("Why?", {"id": "7"})


@pytest.mark.parametrize(
    "row, error",
    [
        (
            {"question": "Q?", "opts": ["a", "b"], "key": 0},
            r"raw/test\.jsonl:2: malformed row \(KeyError: .*no column 'q' \(the input\); columns: key, opts, question",
        ),
        (
            {"q": "Q?", "opts": ["a", "b"], "key": 2},
            r"raw/test\.jsonl:2: .*answer index 2 is outside the 2 choices \(0-based\)",
        ),
        ({"q": "Q?", "opts": ["a", "b"], "key": "c"}, r"raw/test\.jsonl:2: .*answer 'c' is not one of the choices"),
        ({"q": "Q?", "opts": ["a"], "key": 0}, r"raw/test\.jsonl:2: .*needs at least 2 choices"),
        ({"q": "", "opts": ["a", "b"], "key": 0}, r"raw/test\.jsonl:2: .*input 'q' must be non-empty text"),
    ],
)
def test_a_bad_row_names_file_line_and_fix(tmp_path, row, error):
    data = write_jsonl(tmp_path / "quiz.jsonl", [QUIZ[0], row])
    with pytest.raises(EvaltrailError, match=error + r".*max_malformed"):
        load(mc_conf(data), tmp_path)


def test_bad_confs_fail_before_reading_rows(tmp_path):
    data = write_jsonl(tmp_path / "quiz.jsonl", QUIZ)
    with pytest.raises(
        EvaltrailError, match=r"scenario\.my_quiz\.columns\.question: not a role of the multiple_choice loader"
    ):
        load(mc_conf(data, columns={"question": "q"}), tmp_path)
    with pytest.raises(
        EvaltrailError,
        match=r"scenario\.my_quiz\.loader: unknown loader 'mcq'; the generic ones: generation, multiple_choice",
    ):
        load(mc_conf(data, loader="mcq"), tmp_path)
    with pytest.raises(EvaltrailError, match=r"scenario\.my_quiz\.sep: unknown key for the multiple_choice loader"):
        load(mc_conf(data, sep=","), tmp_path)
    with pytest.raises(
        EvaltrailError, match=r"'multiple_choice' names a generic loader; choose it with `loader: multiple_choice`"
    ):
        get_scenario("multiple_choice").check(build_scenario({**mc_conf(data), "loader": None}, "x", "multiple_choice"))
    comma = {
        "task": "qa",
        "domain": "trivia (history",
        "science)": None,
    }  # `domain: trivia (history, science)` unquoted
    with pytest.raises(
        EvaltrailError, match=r"taxonomy\.science\): unknown taxonomy key; valid: group, task, domain, risk"
    ):
        load(mc_conf(data, taxonomy=comma), tmp_path)
    bad = {**mc_conf(data), "sources": [{**mc_conf(data)["sources"][0], "file": "train.jsonl"}]}
    with pytest.raises(
        EvaltrailError,
        match=r"reads split 'test' from one file named test\.jsonl, test\.csv or test\.parquet; found none",
    ):
        load(bad, tmp_path)


def test_file_source_is_pinned(tmp_path):
    data = write_jsonl(tmp_path / "quiz.jsonl", QUIZ)
    conf = mc_conf(data)
    data.write_text(data.read_text() + json.dumps(QUIZ[0]) + "\n")  # edited after pinning
    with pytest.raises(EvaltrailError, match=r"sha256 mismatch: expected [0-9a-f]{64}, got [0-9a-f]{64}"):
        load(conf, tmp_path)
    conf["sources"][0]["path"] = str(tmp_path / "gone.jsonl")
    with pytest.raises(EvaltrailError, match=r"sources\[0\] test\.jsonl\.path: no such file .*gone\.jsonl"):
        load(conf, tmp_path)


def test_scenario_check_validates_a_one_file_conf(tmp_path, monkeypatch):
    """`evaltrail scenario check` on a contributor's conf: pins, loader, ids, adapter."""
    root = Path(__file__).resolve().parents[1]
    conf = tmp_path / "conf"
    (conf / "scenario").mkdir(parents=True)
    for f in ("config.yaml",):
        (conf / f).write_text((root / "conf" / f).read_text())
    for d in ("suite", "model"):
        (conf / d).symlink_to(root / "conf" / d)
    data = write_jsonl(tmp_path / "quiz.jsonl", QUIZ)
    (conf / "scenario" / "my_quiz.yaml").write_text(json.dumps(mc_conf(data)))  # JSON is YAML
    monkeypatch.setenv("EVALTRAIL_CACHE", str(tmp_path / "cache"))
    lines = check_scenario("my_quiz", conf)
    assert "ok  split test: 6 instances (0 exact duplicates, dropped at sampling)" in lines
    assert any(line.startswith("ok  adapter: 17 requests for 6 sampled instances") for line in lines), lines


SCENARIO_YAML = """\
# A contributor's quiz: one conf file, no Python.
description: "Six trivia questions (a test of the generic loader)"
taxonomy: {{group: knowledge, task: question answering, domain: trivia, language: English}}
license: CC0-1.0
method: multiple_choice_separate
loader: multiple_choice
columns: {{input: q, choices: opts, answer: key}}
eval_split: test
input_noun: Question
output_noun: Answer
metrics: [acc, acc_norm]
main_metric: acc
sources:
  - {{file: test.jsonl, kind: file, path: mydata/quiz.jsonl, sha256: {sha}}}
"""

SUITE_YAML = """\
# @package _global_
defaults:
  - /scenario@scenario.my_quiz: my_quiz
  - /model@model.smollm2_135m_instruct: smollm2_135m_instruct
bootstrap_samples: 50
"""


@pytest.mark.e2e
def test_a_one_yaml_scenario_runs_through_dvc_exp_run(smoke_repo, tmp_path):
    """A scenario from a temporary JSONL, added as one conf (plus the suite that runs it), goes
    through the real pipeline with the real model; an edit to the file is then caught by its pin."""
    from .pipeline import copy_workspace, dvc, sh, workspace_env

    ws = copy_workspace(smoke_repo, tmp_path / "ws")
    data = write_jsonl(ws / "mydata" / "quiz.jsonl", QUIZ)
    (ws / "conf" / "scenario" / "my_quiz.yaml").write_text(SCENARIO_YAML.format(sha=sha(data)))
    (ws / "conf" / "suite" / "my_quiz.yaml").write_text(SUITE_YAML)
    env = {**workspace_env(smoke_repo), "MLFLOW_TRACKING_URI": workspace_env(ws)["MLFLOW_TRACKING_URI"]}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        dvc(ws, "exp", "run", "-S", "suite=my_quiz")
        completions = pd.read_parquet(ws / "results" / "completions" / "my_quiz" / "smollm2_135m_instruct.parquet")
        assert len(completions) == 17 and completions["logprob"].notna().all()
        board = pd.read_csv(ws / "results" / "leaderboard.csv")
        acc = board[(board["scenario"] == "my_quiz") & (board["metric"] == "acc")]
        assert len(acc) == 1 and acc["n"].item() == 6 and 0 <= acc["mean"].item() <= 1
        raw = json.loads((ws / "data" / "raw" / "my_quiz" / "SOURCES.json").read_text())
        assert [(r["kind"], r["path"], r["sha256"]) for r in raw] == [("file", "mydata/quiz.jsonl", sha(data))]
        data.write_text(data.read_text() + json.dumps(QUIZ[0]) + "\n")  # edited, pin not updated
        check = sh(ws, "python", "-m", "evaltrail.cli", "scenario", "check", "my_quiz", check=False)
        assert check.returncode == 1 and "sha256 mismatch" in check.stderr, (check.stdout, check.stderr)
