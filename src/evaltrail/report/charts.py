"""Inline SVG charts from results/plots/*.csv: no JS library, no network, deterministic text.

Each present CSV becomes one or more charts; an absent one is skipped (the plots stage is optional).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from pathlib import Path

import pandas as pd

from .inputs import read_optional_csv

PALETTE = ("#1f6fb4", "#d6452b", "#2f9e44", "#8e5bc9", "#e8890c", "#7d5a4f", "#d1479b", "#13a3b5")
MARKERS = ("circle", "square", "triangle", "diamond")
LEFT, RIGHT, TOP, BOTTOM = 56, 170, 16, 44  # plot margins; the right one holds the legend


@dataclass(frozen=True)
class Chart:
    key: str
    """Stable id (the CSV's stem, plus the scenario for per-scenario charts)."""
    title: str
    """Caption."""
    svg: str
    """The chart as an inline <svg> element."""


def _f(x: float) -> str:
    return f"{x:.1f}"


def _colors(models: list[str]) -> dict[str, str]:
    return {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(models)}


def _ordered(values, order: list[str]) -> list[str]:
    present = set(values)
    return [v for v in order if v in present] + sorted(present - set(order))


class _Axes:
    """Linear data->pixel mapping with ticks, gridlines and axis titles."""

    def __init__(self, width: int, height: int, x: tuple[float, float], y: tuple[float, float], left: int = LEFT):
        self.w, self.h, self.x, self.y, self.left = width, height, x, y, left
        self.parts: list[str] = []

    def px(self, v: float) -> float:
        lo, hi = self.x
        return self.left + (v - lo) / ((hi - lo) or 1) * (self.w - self.left - RIGHT)

    def py(self, v: float) -> float:
        lo, hi = self.y
        return self.h - BOTTOM - (v - lo) / ((hi - lo) or 1) * (self.h - TOP - BOTTOM)

    def frame(self, xlabel: str, ylabel: str, xticks: list[float], yticks: list[float]) -> None:
        x0, x1, y0, y1 = self.px(self.x[0]), self.px(self.x[1]), self.py(self.y[0]), self.py(self.y[1])
        for t in yticks:
            self.parts.append(
                f'<line class="grid" x1="{_f(x0)}" x2="{_f(x1)}" y1="{_f(self.py(t))}" y2="{_f(self.py(t))}"/>'
                f'<text class="tick" x="{_f(x0 - 6)}" y="{_f(self.py(t) + 4)}" text-anchor="end">{t:g}</text>'
            )
        for t in xticks:
            self.parts.append(
                f'<text class="tick" x="{_f(self.px(t))}" y="{_f(y0 + 16)}" text-anchor="middle">{t:g}</text>'
            )
        self.parts.append(
            f'<line class="axis" x1="{_f(x0)}" x2="{_f(x1)}" y1="{_f(y0)}" y2="{_f(y0)}"/>'
            f'<line class="axis" x1="{_f(x0)}" x2="{_f(x0)}" y1="{_f(y0)}" y2="{_f(y1)}"/>'
        )
        self.parts.append(
            f'<text class="label" x="{_f((x0 + x1) / 2)}" y="{_f(self.h - 8)}" '
            f'text-anchor="middle">{escape(xlabel)}</text>'
            f'<text class="label" transform="translate(14 {_f((y0 + y1) / 2)}) rotate(-90)" '
            f'text-anchor="middle">{escape(ylabel)}</text>'
        )

    def legend(self, entries: list[tuple[str, str]]) -> None:
        """entries: (label, SVG of a marker centred on 0,0)."""
        x = self.w - RIGHT + 16
        for i, (label, mark) in enumerate(entries):
            y = TOP + 10 + i * 18
            self.parts.append(
                f'<g transform="translate({_f(x)} {_f(y)})">{mark}</g>'
                f'<text class="legend" x="{_f(x + 12)}" y="{_f(y + 4)}">{escape(label)}</text>'
            )

    def svg(self, label: str) -> str:
        return (
            f'<svg class="chart" viewBox="0 0 {self.w} {self.h}" width="{self.w}" height="{self.h}" role="img" '
            f'aria-label="{escape(label)}" xmlns="http://www.w3.org/2000/svg">' + "".join(self.parts) + "</svg>"
        )


def _marker(shape: str, color: str, x: float = 0, y: float = 0, r: float = 4.5) -> str:
    if shape == "square":
        return f'<rect x="{_f(x - r)}" y="{_f(y - r)}" width="{_f(2 * r)}" height="{_f(2 * r)}" fill="{color}"/>'
    if shape == "triangle":
        return f'<polygon points="{_f(x)},{_f(y - r)} {_f(x + r)},{_f(y + r)} {_f(x - r)},{_f(y + r)}" fill="{color}"/>'
    if shape == "diamond":
        return (
            f'<polygon points="{_f(x)},{_f(y - r)} {_f(x + r)},{_f(y)} {_f(x)},{_f(y + r)} {_f(x - r)},{_f(y)}" '
            f'fill="{color}"/>'
        )
    return f'<circle cx="{_f(x)}" cy="{_f(y)}" r="{_f(r)}" fill="{color}"/>'


def _ticks(hi: float, n: int = 5) -> list[float]:
    """Round ticks from 0 to at least `hi`."""
    if hi <= 0:
        return [0.0, 1.0]
    step = 10 ** math.floor(math.log10(hi / n))
    step *= next(k for k in (1, 2, 5, 10) if hi / (step * k) <= n)
    return [round(i * step, 10) for i in range(int(math.ceil(hi / step)) + 1)]


UNIT = [0, 0.2, 0.4, 0.6, 0.8, 1.0]


def scatter(frame: pd.DataFrame, models: list[str]) -> Chart:
    """Accuracy (main metric) against tokens per instance: one point per (model, scenario)."""
    colors, scen = _colors(_ordered(frame["model"], models)), sorted(frame["scenario"].unique())
    shapes = {s: MARKERS[i % len(MARKERS)] for i, s in enumerate(scen)}
    xt = _ticks(float(frame["tokens_per_instance"].max()) if len(frame) else 1.0)
    ax = _Axes(640, 340, (0, xt[-1]), (0, 1))
    ax.frame("tokens per instance (prompt + output)", "accuracy", xt, UNIT)
    for r in frame.sort_values(["scenario", "model"]).itertuples(index=False):
        if pd.isna(r.accuracy) or pd.isna(r.tokens_per_instance):
            continue
        tip = (
            f"{r.model} · {r.scenario} ({r.metric}): {r.accuracy:.3f} at {r.tokens_per_instance:.1f} "
            "tokens per instance"
        )
        ax.parts.append(
            f'<g class="point"><title>{escape(tip)}</title>'
            f"{_marker(shapes[r.scenario], colors[r.model], ax.px(r.tokens_per_instance), ax.py(r.accuracy))}</g>"
        )
    ax.legend([(m, _marker("circle", c)) for m, c in colors.items()] + [(s, _marker(shapes[s], "#666")) for s in scen])
    return Chart("accuracy_vs_tokens", "Accuracy vs tokens per instance", ax.svg("accuracy vs tokens per instance"))


def reliability(frame: pd.DataFrame, models: list[str]) -> list[Chart]:
    """Reliability diagram per scenario: accuracy per confidence bin; the diagonal is perfect calibration."""
    charts = []
    colors = _colors(_ordered(frame["model"], models))
    for scenario in sorted(frame["scenario"].unique()):
        part = frame[frame["scenario"] == scenario]
        ax = _Axes(640, 340, (0, 1), (0, 1))
        ax.frame("confidence", "accuracy", UNIT, UNIT)
        ax.parts.append(
            f'<line class="diagonal" x1="{_f(ax.px(0))}" y1="{_f(ax.py(0))}" x2="{_f(ax.px(1))}" y2="{_f(ax.py(1))}"/>'
        )
        for model, color in colors.items():
            rows = part[(part["model"] == model) & part["confidence"].notna() & part["accuracy"].notna()]
            rows = rows.sort_values(["confidence", "bin"])
            if rows.empty:
                continue
            pts = " ".join(f"{_f(ax.px(c))},{_f(ax.py(a))}" for c, a in zip(rows["confidence"], rows["accuracy"]))
            ax.parts.append(f'<polyline class="series" points="{pts}" stroke="{color}"/>')
            for r in rows.itertuples(index=False):
                tip = f"{model} bin {r.bin}: confidence {r.confidence:.3f}, accuracy {r.accuracy:.3f}, n={r.n}"
                dot = _marker("circle", color, ax.px(r.confidence), ax.py(r.accuracy), 3.5)
                ax.parts.append(f'<g class="point"><title>{escape(tip)}</title>{dot}</g>')
        ax.legend(
            [(m, _marker("circle", c)) for m, c in colors.items()]
            + [("perfect calibration", '<line class="diagonal" x1="-6" y1="0" x2="6" y2="0"/>')]
        )
        charts.append(
            Chart(f"reliability-{scenario}", f"Reliability diagram: {scenario}", ax.svg(f"reliability {scenario}"))
        )
    return charts


def grouped_bars(frame: pd.DataFrame, models: list[str]) -> Chart:
    """Accuracy per MMLU subject, one bar per model (horizontal: subject names are long)."""
    colors = _colors(_ordered(frame["model"], models))
    subjects = sorted(frame["subject"].unique())
    bar, gap, left = 11, 10, 200
    height = TOP + BOTTOM + len(subjects) * (bar * len(colors) + gap)
    ax = _Axes(700, height, (0, 1), (0, 1), left=left)
    ax.frame("accuracy", "", UNIT, [])
    by = {(r.subject, r.model): r for r in frame.itertuples(index=False)}
    y = TOP
    for s in subjects:
        ax.parts.append(
            f'<text class="tick" x="{left - 6}" y="{_f(y + bar * len(colors) / 2 + 4)}" '
            f'text-anchor="end">{escape(s)}</text>'
        )
        for m, color in colors.items():
            r = by.get((s, m))
            if r is not None and not pd.isna(r.accuracy):
                tip = f"{m} · {s}: {r.accuracy:.3f} (n={r.n})"
                ax.parts.append(
                    f'<rect class="bar" x="{_f(ax.px(0))}" y="{_f(y)}" width="{_f(ax.px(r.accuracy) - ax.px(0))}" '
                    f'height="{bar - 1}" fill="{color}"><title>{escape(tip)}</title></rect>'
                )
            y += bar
        y += gap
    ax.legend([(m, _marker("square", c)) for m, c in colors.items()])
    return Chart("mmlu_subjects", "MMLU accuracy per subject", ax.svg("accuracy per subject"))


PLOTS = {  # file -> (required columns, chart builder)
    "accuracy_vs_tokens.csv": (["model", "scenario", "metric", "accuracy", "tokens_per_instance"], scatter),
    "reliability.csv": (["model", "scenario", "bin", "confidence", "accuracy", "n"], reliability),
    "mmlu_subjects.csv": (["model", "subject", "accuracy", "n"], grouped_bars),
}


def charts(plots_dir: Path, models: list[str]) -> list[Chart]:
    out: list[Chart] = []
    for name, (columns, build) in PLOTS.items():
        frame = read_optional_csv(plots_dir / name, columns)
        if frame is not None and len(frame):
            labels = [c for c in ("model", "scenario", "metric", "subject") if c in columns]
            frame = frame.astype({c: str for c in labels})  # a name like "1" must stay a label
            made = build(frame, models)
            out += made if isinstance(made, list) else [made]
    return out
