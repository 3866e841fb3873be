"""Per metric family: a model x scenario table of each scenario's headline metric, and HELM's mean
win rate over its columns."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..metrics import FAMILIES
from .ranking import mean_win_rate

# The metric that stands for a family in a scenario, first present wins ({main}: the scenario's
# main metric). Bias: HELM's headline representation score; BBQ's own score where it has one.
HEADLINE = {
    "accuracy": ("{main}",),
    "calibration": ("ece_10_bin",),
    "robustness": ("{main}/robustness",),
    "fairness": ("{main}/fairness",),
    "bias": ("bbq_bias_ambiguous", "representation_gender"),
    "toxicity": ("toxic_fraction",),
    "efficiency": ("prompt_tokens",),  # seconds measure the machine (results/costs), not the model
    "safety": ("over_refusal",),
}


@dataclass(frozen=True)
class FamilyTable:
    family: str
    """HELM metric family."""
    columns: list[str]
    """`scenario: metric`, one per scenario that has a headline metric for this family."""
    cells: pd.DataFrame
    """Index model, columns as `columns`; each cell a dict {mean, ci_low, ci_high, n} or None."""
    win_rate: pd.Series
    """HELM's mean win rate per model (NaN when no column has a direction and two values)."""


def headline(family: str, summary: dict) -> str | None:
    main = summary.get("main_metric") or ""
    for pattern in HEADLINE[family]:
        name = pattern.format(main=main)
        st = summary["metrics"].get(name)
        if st and st.get("mean") is not None and st.get("family", "accuracy") == family:
            return name
    return None


def family_tables(summaries: dict[tuple[str, str], dict]) -> list[FamilyTable]:
    models = sorted({m for _, m in summaries})
    scenarios = sorted({s for s, _ in summaries})
    out = []
    for family in FAMILIES:
        cols, cells, values, directions = [], {}, {}, {}
        for s in scenarios:
            names = {headline(family, summ) for (sc, _), summ in summaries.items() if sc == s} - {None}
            if len(names) != 1:
                continue
            metric = names.pop()
            col = f"{s}: {metric}"
            cols.append(col)
            per_model = {m: summaries.get((s, m), {}).get("metrics", {}).get(metric) for m in models}
            cells[col] = {
                m: (None if st is None else {k: st[k] for k in ("mean", "ci_low", "ci_high", "n")})
                for m, st in per_model.items()
            }
            values[col] = {m: (None if st is None else st["mean"]) for m, st in per_model.items()}
            hib = next((st.get("higher_is_better", True) for st in per_model.values() if st), None)
            directions[col] = None if hib is None else ("higher" if hib else "lower")
        if not cols:
            continue
        table = pd.DataFrame(values, index=models, columns=cols, dtype="float64")
        out.append(
            FamilyTable(
                family, cols, pd.DataFrame(cells, index=models, columns=cols), mean_win_rate(table, directions).mean
            )
        )
    return out


def _fmt(cell) -> str:
    if not cell or cell["mean"] is None:  # no value, or undefined for this model (e.g. BBQ bias with no biased answer)
        return "—"
    if cell["ci_low"] is None:
        return f"{cell['mean']:.3f}"
    return f"{cell['mean']:.3f} [{cell['ci_low']:.3f}, {cell['ci_high']:.3f}]"


def to_markdown(tables: list[FamilyTable]) -> list[str]:
    lines = []
    for t in tables:
        lines += [
            "",
            f"### {t.family.capitalize()}",
            "",
            "| model | mean win rate | " + " | ".join(t.columns) + " |",
            "|---" * (len(t.columns) + 2) + "|",
        ]
        for m in t.cells.index:
            wr = t.win_rate.get(m)
            lines.append(
                f"| {m} | {'—' if pd.isna(wr) else f'{wr:.3f}'} | "
                + " | ".join(_fmt(t.cells.loc[m, c]) for c in t.columns)
                + " |"
            )
    return lines


def to_records(tables: list[FamilyTable]) -> list[dict]:
    """JSON-ready: [{family, columns, rows: [{model, mean_win_rate, cells: {column: cell}}]}]."""
    return [
        {
            "family": t.family,
            "columns": t.columns,
            "rows": [
                {
                    "model": m,
                    "mean_win_rate": None if pd.isna(t.win_rate.get(m)) else float(t.win_rate[m]),
                    "cells": {c: t.cells.loc[m, c] for c in t.columns},
                }
                for m in t.cells.index
            ],
        }
        for t in tables
    ]
