"""Leaderboard: every (scenario, model, metric) with its mean and 95% CI, in CSV, Markdown, JSON."""

from __future__ import annotations

import pandas as pd

from ..config import RunConfig
from ..errors import EvaltrailError
from ..io import read_json
from ..paths import summary_path

COLUMNS = ["scenario", "model", "metric", "main", "mean", "ci_low", "ci_high", "n"]


def collect(run: RunConfig) -> dict[tuple[str, str], dict]:
    """The score summaries of every selected (scenario, model) cell."""
    out = {}
    for s in run.scenarios:
        for m in run.models:
            path = summary_path(s, m)
            if not path.is_file():
                raise EvaltrailError(f"{path}: missing; run `dvc repro score@{s}-{m}`")
            out[(s, m)] = read_json(path)
    return out


def leaderboard(summaries: dict[tuple[str, str], dict]) -> pd.DataFrame:
    rows = []
    for (s, m), summ in sorted(summaries.items()):
        for metric, st in sorted(summ["metrics"].items()):
            if st["mean"] is None:
                continue
            rows.append({"scenario": s, "model": m, "metric": metric,
                         "main": metric == summ["main_metric"], **{k: st[k] for k in ("mean", "ci_low", "ci_high", "n")}})
    return pd.DataFrame(rows, columns=COLUMNS)


def _cell(row) -> str:
    return f"{row['mean']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}]"


def to_markdown(board: pd.DataFrame) -> str:
    """Main metric per scenario (columns) for each model (rows), then every metric."""
    main = board[board["main"].astype(bool)]
    scenarios = sorted(main["scenario"].unique())
    heads = [f"{s} ({main[main['scenario'] == s]['metric'].iloc[0]})" for s in scenarios]
    lines = ["# Leaderboard", "", "Main metric per scenario: mean [95% bootstrap CI].", "",
             "| model | " + " | ".join(heads) + " |", "|---" * (len(heads) + 1) + "|"]
    for m in sorted(main["model"].unique()):
        cells = []
        for s in scenarios:
            hit = main[(main["model"] == m) & (main["scenario"] == s)]
            cells.append(_cell(hit.iloc[0]) if len(hit) else "—")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    lines += ["", "## All metrics", "", "| scenario | model | metric | mean [95% CI] | n |", "|---|---|---|---|---|"]
    for _, r in board.iterrows():
        lines.append(f"| {r['scenario']} | {r['model']} | {r['metric']}{' (main)' if r['main'] else ''} | {_cell(r)} | {r['n']} |")
    return "\n".join(lines) + "\n"


def metrics_json(board: pd.DataFrame) -> dict:
    """DVC metrics: {scenario: {model: {metric: mean}}}, for `dvc metrics show/diff`."""
    out: dict = {}
    for _, r in board.iterrows():
        out.setdefault(r["scenario"], {}).setdefault(r["model"], {})[r["metric"]] = r["mean"]
    return out
