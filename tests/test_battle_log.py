"""External battle logs (the public Arena dump format) rated by the leaderboard's Bradley-Terry code."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from evaltrail.aggregate.battle_log import rate_log, read_battle_log
from evaltrail.aggregate.ranking import arena_ratings
from evaltrail.cli import main
from evaltrail.errors import EvaltrailError

LOG = [
    {"model_a": "alpha", "model_b": "beta", "winner": "model_a", "judge": "h1"},
    {"model_a": "beta", "model_b": "alpha", "winner": "alpha"},
    {"model_a": "alpha", "model_b": "gamma", "winner": "tie (bothbad)"},
    {"model_a": "gamma", "model_b": "beta", "winner": "model_a"},
    {"model_a": "beta", "model_b": "gamma", "winner": "tie"},
    {"model_a": "gamma", "model_b": "alpha", "winner": "model_b"},
    {"model_a": "beta", "model_b": "alpha", "winner": "model_a"},
]


def write(path, rows):
    if path.suffix == ".csv":
        pd.DataFrame(rows).to_csv(path, index=False)
    elif path.suffix == ".json":
        path.write_text(json.dumps(rows))
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".csv"])
def test_every_format_gives_the_same_ratings_as_the_battles_themselves(tmp_path, suffix):
    battles = read_battle_log(write(tmp_path / f"log{suffix}", LOG))
    assert battles["winner"].tolist() == ["model_a", "model_b", "tie", "model_a", "tie", "model_b", "model_a"]
    direct = arena_ratings(battles, 50, 0)
    rated = rate_log(tmp_path / f"log{suffix}", 50, 0)
    pd.testing.assert_frame_equal(rated.table, direct.table)
    assert rated.table.index[0] == "alpha"


@pytest.mark.parametrize(
    "row, message",
    [
        ({"model_a": "a", "model_b": "b"}, r"log.jsonl:2: needs non-empty model_a, model_b, winner"),
        ({"model_a": "a", "model_b": "a", "winner": "tie"}, "a model cannot battle itself"),
        ({"model_a": "a", "model_b": "b", "winner": "c"}, "winner 'c' is neither model_a, model_b, a tie nor one of"),
    ],
)
def test_a_bad_battle_is_named_by_line(tmp_path, row, message):
    with pytest.raises(EvaltrailError, match=message):
        read_battle_log(write(tmp_path / "log.jsonl", [LOG[0], row]))


def test_cli_prints_ratings_and_writes_json(tmp_path, capsys):
    log = write(tmp_path / "log.jsonl", LOG)
    assert main(["ratings", str(log), "--samples", "50", "--anchor", "beta", "--out", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "anchor beta at 1000" in out and "| 1 | alpha |" in out
    saved = json.loads((tmp_path / "r.json").read_text())
    assert [r["model"] for r in saved["ratings"]][0] == "alpha" and saved["samples"] == 50
    assert main(["ratings", str(log), "--anchor", "nobody"]) == 1
    assert "--anchor 'nobody': not a model of" in capsys.readouterr().err


@pytest.mark.parametrize(
    "name, data, message",
    [
        (
            "log.jsonl",
            b'{"model_a": "a", "model_b": "b", "winner": "a"}\n{"model_a": "caf\xe9"}\n',
            r"log\.jsonl:2: not UTF-8 text \(byte 64\); re-encode the log as UTF-8",
        ),
        (
            "log.json",
            b'[{"model_a": "a",\n  "model_b" "b"}]\n',
            r"log\.json:2: not valid JSON \(Expecting ':' delimiter, column 13\)",
        ),
        (
            "log.jsonl",
            b'{"model_a": "a", "model_b": "b", "winner": "a"}\n{"model_a": \n',
            r"log\.jsonl:2: not a JSON object \(Expecting value\); one battle per line",
        ),
        ("log.csv", b'model_a,model_b,winner\na,b,a\n"c,d\n', r"log\.csv: not valid CSV \(.*\)"),
        ("log.csv", b"", r"log\.csv: not valid CSV \(No columns to parse from file\)"),
    ],
    ids=["non-utf8", "bad-json", "bad-jsonl-line", "bad-csv", "empty-csv"],
)
def test_cli_refuses_an_unreadable_log_in_one_line(tmp_path, capsys, name, data, message):
    log = tmp_path / name
    log.write_bytes(data)
    assert main(["ratings", str(log), "--out", str(tmp_path / "r.json")]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and re.fullmatch(rf"error: {re.escape(str(tmp_path))}/{message}", err[0]), err
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # no ratings written


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--samples", "0", "--samples 0: expected at least 1 bootstrap round"),
        ("--samples", "-5", "--samples -5: expected at least 1 bootstrap round"),
        ("--seed", "-1", "--seed -1: expected an integer >= 0"),
    ],
)
def test_cli_refuses_bad_samples_or_seed_in_one_line(tmp_path, capsys, flag, value, message):
    log = write(tmp_path / "log.jsonl", LOG)
    assert main(["ratings", str(log), flag, value, "--out", str(tmp_path / "r.json")]) == 1
    assert capsys.readouterr().err.splitlines() == [f"error: {message}"]
    assert not (tmp_path / "r.json").exists()
