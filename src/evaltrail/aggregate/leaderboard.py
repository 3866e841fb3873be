"""Leaderboard: every (scenario, model, metric) with its mean and 95% CI, in CSV, Markdown, JSON."""

from __future__ import annotations

import pandas as pd

from ..config import GROUPS, OTHER, RunConfig
from ..errors import EvaltrailError
from ..io import read_json
from ..metrics import FAMILIES
from ..paths import rag_summary_path, refusal_summary_path, summary_path

COLUMNS = ["scenario", "model", "metric", "family", "main", "higher_is_better", "mean", "ci_low", "ci_high", "n"]


def collect(run: RunConfig) -> dict[tuple[str, str], dict]:
    """The score summaries of every selected (scenario, model) cell. infer's measurements
    (results/costs) stay out: the leaderboard is the same on every machine."""
    out = {}
    for s in run.scenarios:
        for m in run.models:
            path = summary_path(s, m)
            if not path.is_file():
                raise EvaltrailError(f"{path}: missing; run `dvc repro score@{s}-{m}`")
            out[(s, m)] = read_json(path)
    for (s, m), summ in judged(run, run.rag_scenarios, run.refusal_scenarios).items():
        if (s, m) in out:
            out[(s, m)] = merged(out[(s, m)], summ)
    return out


def judged(run: RunConfig, rag: list[str], refusal: list[str]) -> dict[tuple[str, str], dict]:
    """The judge stages' per-model summaries of these scenarios (RAG metrics, refusal labels):
    their metrics sit beside score's in the same cell."""
    out = {}
    for stage, scenarios, path_of in (("rag", rag, rag_summary_path), ("refusal", refusal, refusal_summary_path)):
        for s in scenarios:
            path = path_of(s)
            if not path.is_file():
                raise EvaltrailError(f"{path}: missing; run `dvc repro {stage}@{s}`")
            for m, summ in read_json(path).items():
                out[(s, m)] = merged(out[(s, m)], summ) if (s, m) in out else summ
    return out


def merged(summary: dict, judged: dict) -> dict:
    """A cell's summary with a judge stage's metrics and classifier checks added."""
    out = {**summary, "metrics": {**summary["metrics"], **judged["metrics"]}}
    if "classifier_checks" in judged:
        out["classifier_checks"] = {**summary.get("classifier_checks", {}), **judged["classifier_checks"]}
    return out


def leaderboard(summaries: dict[tuple[str, str], dict]) -> pd.DataFrame:
    rows = []
    for (s, m), summ in sorted(summaries.items()):
        for metric, st in sorted(summ["metrics"].items()):
            if st["mean"] is None:
                continue
            rows.append(
                {
                    "scenario": s,
                    "model": m,
                    "metric": metric,
                    "family": st.get("family", "accuracy"),
                    "main": metric == summ["main_metric"],
                    "higher_is_better": st.get("higher_is_better", True),
                    **{k: st[k] for k in ("mean", "ci_low", "ci_high", "n")},
                }
            )
    board = pd.DataFrame(rows, columns=COLUMNS)
    order = {f: i for i, f in enumerate(FAMILIES)}
    board["_f"] = board["family"].map(order)
    return (
        board.sort_values(["_f", "scenario", "metric", "model"], kind="stable")
        .drop(columns="_f")
        .reset_index(drop=True)
    )


def _cell(row) -> str:
    if pd.isna(row["ci_low"]):
        return f"{row['mean']:.3f}"
    return f"{row['mean']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}]"


_ARROW = {True: " ↑", False: " ↓"}


def to_markdown(board: pd.DataFrame, sections: list[str] = (), groups: dict[str, str] | None = None) -> str:
    """Main metric per scenario (columns) for each model (rows), one table per leaderboard group
    (`groups`: scenario -> heading, config.group_of; in config.GROUPS order), then `sections` (lines:
    family tables, pairwise comparisons, ...), then every metric grouped by HELM family, one row per
    (scenario, metric) and a column per model."""
    main = board[board["main"].astype(bool)]
    groups = groups or {}
    order = {g: i for i, g in enumerate([*GROUPS.values(), OTHER])}
    by_group: dict[str, list[str]] = {}
    for s in sorted(main["scenario"].unique()):
        by_group.setdefault(groups.get(s, OTHER), []).append(s)
    lines = [
        "# Leaderboard",
        "",
        "Main metric per scenario: mean [95% CI], scenarios grouped as HELM groups them. CIs are analytic "
        "(Wilson for 0/1 scores, else t) for means of per-instance scores and a seeded bootstrap over instances "
        "for corpus metrics; ↑/↓ mark the better direction; `m/robustness` / `m/fairness` are worst cases over "
        "an instance's variants.",
    ]
    for group in sorted(by_group, key=lambda g: order.get(g, len(order))):
        scenarios = by_group[group]
        heads = [f"{s} ({main[main['scenario'] == s]['metric'].iloc[0]})" for s in scenarios]
        lines += ["", f"## {group}", "", "| model | " + " | ".join(heads) + " |", "|---" * (len(heads) + 1) + "|"]
        for m in sorted(main["model"].unique()):
            cells = []
            for s in scenarios:
                hit = main[(main["model"] == m) & (main["scenario"] == s)]
                cells.append(_cell(hit.iloc[0]) if len(hit) else "—")
            lines.append(f"| {m} | " + " | ".join(cells) + " |")
    lines += list(sections)
    lines += ["", "## All metrics"]
    models = sorted(board["model"].unique())
    for family in FAMILIES:
        part = board[board["family"] == family]
        if part.empty:
            continue
        lines += [
            "",
            f"### {family.capitalize()}",
            "",
            "| scenario | metric | n | " + " | ".join(models) + " |",
            "|---" * (len(models) + 3) + "|",
        ]
        for (s, metric), cell in part.groupby(["scenario", "metric"], sort=False):
            by_model = cell.set_index("model")
            first = cell.iloc[0]
            name = f"{metric}{_ARROW.get(first['higher_is_better'], '')}{' (main)' if first['main'] else ''}"
            lines.append(
                f"| {s} | {name} | {first['n']} | "
                + " | ".join(_cell(by_model.loc[m]) if m in by_model.index else "—" for m in models)
                + " |"
            )
    return "\n".join(lines) + "\n"


def metrics_json(board: pd.DataFrame) -> dict:
    """DVC metrics: {scenario: {model: {metric: mean}}}, for `dvc metrics show/diff`."""
    out: dict = {}
    for _, r in board.iterrows():
        out.setdefault(r["scenario"], {}).setdefault(r["model"], {})[r["metric"]] = r["mean"]
    return out
