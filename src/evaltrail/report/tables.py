"""Leaderboard tables: model rows x (scenario, metric) columns, mean with its 95% CI.

Built from results/leaderboard.json (one table for the main metrics, one per HELM family) and,
when it exists, results/leaderboard_families.json (per-family tables with mean win rates).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import EvaltrailError
from ..metrics import FAMILIES

RECORD_KEYS = ("scenario", "model", "metric", "family", "main", "mean", "ci_low", "ci_high")
_ARROW = {True: " ↑", False: " ↓"}


@dataclass(frozen=True)
class Cell:
    text: str
    """What the reader sees first: the mean (or the row label)."""
    sort: float | str | None
    """What a click on the header sorts by: the mean for numbers, the text for labels."""
    ci: str = ""
    """The 95% CI, shown small under the mean, e.g. `[0.210, 0.385]`."""
    title: str = ""
    """Tooltip (sample size)."""


@dataclass(frozen=True)
class Column:
    label: str
    """Header text."""
    numeric: bool = True
    """Sort numerically (else as text)."""
    title: str = ""
    """Tooltip: what the column holds."""
    group: str = ""
    """Spanning header above this column (the scenario); columns of a group are adjacent."""


@dataclass(frozen=True)
class Table:
    key: str
    """Stable id (for the HTML and tests)."""
    title: str
    """Heading above the table."""
    columns: list[Column]
    """The first column is the row label (the model)."""
    rows: list[list[Cell]]
    """One per model."""


def _finite(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None


def number(v: Any) -> str:
    v = _finite(v)
    if v is None:
        return "—"
    return f"{v:.1f}" if abs(v) >= 100 else f"{v:.3f}"


def stat_cell(st: dict | None, n: Any = None) -> Cell:
    """Mean with [CI low, CI high] below it; a dash when the cell is empty."""
    mean = _finite((st or {}).get("mean"))
    if mean is None:
        return Cell("—", None)
    lo, hi = _finite(st.get("ci_low")), _finite(st.get("ci_high"))
    ci = f"[{number(lo)}, {number(hi)}]" if lo is not None and hi is not None else ""
    return Cell(number(mean), mean, ci, f"n={n}" if n is not None else "")


def _models(records: list[dict], order: list[str]) -> list[str]:
    seen = {r["model"] for r in records}
    return [m for m in order if m in seen] + sorted(seen - set(order))


def _grid(key: str, title: str, records: list[dict], models: list[str]) -> Table:
    cols = sorted({(r["scenario"], r["metric"]) for r in records})
    direction = {(r["scenario"], r["metric"]): r.get("higher_is_better") for r in records}
    by = {(r["model"], r["scenario"], r["metric"]): r for r in records}
    columns = [Column("model", numeric=False)]
    columns += [
        Column(m + _ARROW.get(direction[(s, m)], ""), title=f"{s}: {m}, mean [95% CI]", group=s) for s, m in cols
    ]
    rows = [
        [Cell(model, model)] + [stat_cell(by.get((model, s, m)), by.get((model, s, m), {}).get("n")) for s, m in cols]
        for model in models
    ]
    return Table(key, title, columns, rows)


def check_records(records: Any, path: Path) -> list[dict]:
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise EvaltrailError(f"{path}: expected a list of records; re-run `dvc repro aggregate`")
    for i, r in enumerate(records):
        absent = [k for k in RECORD_KEYS if k not in r]
        if absent:
            raise EvaltrailError(f"{path}: record {i} lacks {absent[0]!r}; re-run `dvc repro aggregate`")
    return records


def leaderboard_tables(records: list[dict], model_order: list[str]) -> list[Table]:
    """The main metric of each scenario, then every metric grouped by family (HELM's order)."""
    models = _models(records, model_order)
    main = [r for r in records if r["main"]]
    tables = [_grid("main", "Main metric per scenario", main, models)] if main else []
    families = [f for f in FAMILIES if any(r["family"] == f for r in records)]
    families += sorted({r["family"] for r in records} - set(families))
    tables += [_grid(f"family-{f}", f.capitalize(), [r for r in records if r["family"] == f], models) for f in families]
    return tables


def family_tables(entries: Any, path: Path) -> list[Table]:
    """Per-family tables with each model's mean win rate, in the file's order."""
    if not isinstance(entries, list):
        raise EvaltrailError(f"{path}: expected a list of {{family, columns, rows}}")
    tables = []
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or not all(k in e for k in ("family", "columns", "rows")):
            raise EvaltrailError(f"{path}: entry {i} lacks family/columns/rows")
        columns = [
            Column("model", numeric=False),
            Column("mean win rate", title="mean over columns of the share of other models this one beats"),
        ]
        columns += [Column(str(c)) for c in e["columns"]]
        rows = []
        for r in e["rows"]:
            wr = _finite(r.get("mean_win_rate"))
            rows.append(
                [Cell(str(r.get("model")), str(r.get("model"))), Cell(number(wr), wr)]
                + [stat_cell(cell, (cell or {}).get("n")) for cell in map((r.get("cells") or {}).get, e["columns"])]
            )
        tables.append(Table(f"winrate-{e['family']}", f"{str(e['family']).capitalize()}: mean win rate", columns, rows))
    return tables


def battle_tables(scenario: str, summary: dict) -> list[Table]:
    """A battle's Bradley–Terry ratings (with CI and CI-rule rank) and its win-rate matrix."""
    ratings = Table(
        f"battle-{scenario}",
        f"{scenario}: Bradley–Terry ratings ({summary['method']} verdicts by "
        f"{summary['judge']}, agreement between orders {summary['agreement']:.1%})",
        [
            Column("model", numeric=False),
            Column("rating", title="mean 1000, 95% bootstrap CI"),
            Column("rank", title="1 + models whose CI lies wholly above"),
            Column("battles"),
        ],
        [
            [
                Cell(r["model"], r["model"]),
                stat_cell({"mean": r["rating"], "ci_low": r["ci_low"], "ci_high": r["ci_high"]}, r["battles"]),
                Cell(str(r["rank"]), r["rank"]),
                Cell(str(r["battles"]), r["battles"]),
            ]
            for r in summary["ratings"]
        ],
    )
    models = sorted(summary["win_rate"])
    wins = Table(
        f"battle-{scenario}-wins",
        f"{scenario}: win rate of the row model against the column model",
        [Column("model", numeric=False)] + [Column(m) for m in models],
        [
            [Cell(m, m)] + [Cell(number(summary["win_rate"][m][o]), _finite(summary["win_rate"][m][o])) for o in models]
            for m in models
        ],
    )
    return [ratings, wins]


def classifier_tables(scenario: str, checks: dict) -> list[Table]:
    """Each refusal classifier against people: accuracy and kappa with CIs, pooled and per source;
    a kappa below the warning threshold is marked in the last column."""
    from ..metrics.refusal import KAPPA_WARN

    return [
        Table(
            f"classifier-{scenario}-{name}",
            f"{scenario}: the {name} refusal classifier against XSTest's human labels",
            [
                Column("answers", numeric=False, title="whose answers were labelled"),
                Column("n"),
                Column("accuracy", title="share of answers labelled as people did, 95% bootstrap CI"),
                Column("kappa", title="Cohen's kappa over the three labels, 95% bootstrap CI"),
                Column("reliable", numeric=False, title=f"kappa >= {KAPPA_WARN}"),
            ],
            [
                [
                    Cell(source, source),
                    Cell(f"{part['n']:,}", part["n"]),
                    stat_cell(part["accuracy"], part["n"]),
                    stat_cell(part["kappa"], part["n"]),
                    Cell("no: kappa < 0.6" if "warning" in part else "yes", "warning" not in part),
                ]
                for source, part in [("all", c), *sorted(c.get("per_source", {}).items())]
            ],
        )
        for name, c in sorted(checks.items())
    ]
