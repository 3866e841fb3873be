"""External battle logs (human votes, other judges) rated by the leaderboard's own Bradley–Terry code.

A log is JSONL, JSON (a list of records) or CSV with one battle a row: `model_a`, `model_b` and
`winner`, as the public Chatbot Arena dumps have them. `winner` is "model_a", "model_b", "tie" or
"tie (bothbad)", or the winning model's own name. Other columns are ignored.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd

from ..errors import EvaltrailError
from ..io import read_text
from .ranking import _TIES, ArenaRatings, arena_ratings

COLUMNS = ("model_a", "model_b", "winner")


def _records(path: Path) -> list[dict]:
    text = read_text(path, "re-encode the log as UTF-8")
    if path.suffix == ".csv":
        try:
            return pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False).to_dict(orient="records")
        except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
            raise EvaltrailError(f"{path}: not valid CSV ({str(exc).strip().splitlines()[-1]})") from None
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise EvaltrailError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}, column {exc.colno})") from None
        if not isinstance(data, list):
            raise EvaltrailError(f"{path}: expected a JSON list of battles, got {type(data).__name__}")
        return data
    rows = []
    for i, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise EvaltrailError(f"{path}:{i}: not a JSON object ({exc.msg}); one battle per line") from None
    return rows


def read_battle_log(path: str | Path) -> pd.DataFrame:
    """The log's battles as columns model_a, model_b, winner (model_a / model_b / tie)."""
    path = Path(path)
    if not path.is_file():
        raise EvaltrailError(f"{path}: no such battle log")
    if path.suffix not in (".jsonl", ".json", ".csv"):
        raise EvaltrailError(f"{path}: unknown battle log format {path.suffix!r}; use .jsonl, .json or .csv")
    out = []
    for i, rec in enumerate(_records(path), 1):
        where = f"{path}:{i}" if path.suffix == ".jsonl" else f"{path} battle {i}"
        if not isinstance(rec, dict) or any(not rec.get(c) for c in COLUMNS):
            raise EvaltrailError(f"{where}: needs non-empty {', '.join(COLUMNS)}")
        a, b, w = str(rec["model_a"]), str(rec["model_b"]), str(rec["winner"])
        if a == b:
            raise EvaltrailError(f"{where}: a model cannot battle itself ({a})")
        if w in _TIES:
            w = "tie"
        elif w not in ("model_a", "model_b"):
            if w not in (a, b):
                raise EvaltrailError(
                    f"{where}: winner {w!r} is neither model_a, model_b, a tie nor one of the two models ({a}, {b})"
                )
            w = "model_a" if w == a else "model_b"
        out.append((a, b, w))
    if not out:
        raise EvaltrailError(f"{path}: no battles")
    return pd.DataFrame(out, columns=list(COLUMNS))


def rate_log(path: str | Path, samples: int, seed: int, anchor: str | None = None) -> ArenaRatings:
    if samples < 1:  # checked before the log is read: a usage error, not a property of the log
        raise EvaltrailError(f"--samples {samples}: expected at least 1 bootstrap round")
    if seed < 0:
        raise EvaltrailError(f"--seed {seed}: expected an integer >= 0")
    battles = read_battle_log(path)
    if anchor is not None and anchor not in set(battles["model_a"]) | set(battles["model_b"]):
        raise EvaltrailError(f"--anchor {anchor!r}: not a model of {path}")
    return arena_ratings(battles, samples, seed, anchor=anchor)


def to_markdown(r: ArenaRatings) -> str:
    head = (
        f"Bradley–Terry ratings (scale 400, base 10, {'anchor ' + r.anchor if r.anchor else 'mean'} at "
        f"{r.anchor_rating:g}), {int(r.level * 100)}% CI from {r.samples} seeded bootstrap rounds (seed {r.seed})"
    )
    rows = ["| rank | model | rating | CI | battles |", "|---|---|---|---|---|"]
    rows += [
        f"| {int(t['rank'])} | {m} | {t['rating']:.1f} | [{t['ci_low']:.1f}, {t['ci_high']:.1f}] | "
        f"{int(t['battles'])} |"
        for m, t in r.table.iterrows()
    ]
    return "\n".join([head, "", *rows]) + "\n"
