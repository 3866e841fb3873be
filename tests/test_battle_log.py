"""External battle logs (the public Arena dump format) rated by the leaderboard's Bradley-Terry code."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from evaltrail.aggregate.battle_log import rate_log, read_battle_log
from evaltrail.aggregate.ranking import arena_ratings
from evaltrail.cli import main
from evaltrail.errors import EvaltrailError

LOG = [{"model_a": "alpha", "model_b": "beta", "winner": "model_a", "judge": "h1"},
       {"model_a": "beta", "model_b": "alpha", "winner": "alpha"},
       {"model_a": "alpha", "model_b": "gamma", "winner": "tie (bothbad)"},
       {"model_a": "gamma", "model_b": "beta", "winner": "model_a"},
       {"model_a": "beta", "model_b": "gamma", "winner": "tie"},
       {"model_a": "gamma", "model_b": "alpha", "winner": "model_b"},
       {"model_a": "beta", "model_b": "alpha", "winner": "model_a"}]


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


@pytest.mark.parametrize("row, message", [
    ({"model_a": "a", "model_b": "b"}, r"log.jsonl:2: needs non-empty model_a, model_b, winner"),
    ({"model_a": "a", "model_b": "a", "winner": "tie"}, "a model cannot battle itself"),
    ({"model_a": "a", "model_b": "b", "winner": "c"}, "winner 'c' is neither model_a, model_b, a tie nor one of")])
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
