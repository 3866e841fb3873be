"""Reproducing a published result: a model card's rows next to what this run measured.

A reproduction suite (conf/suite/reproduce_*.yaml) carries the card's rows under `reproduce:`;
aggregate writes results/reproduction.{md,json}: published, measured with its 95% CI, delta,
whether the delta is within tolerance, and every setting that differs from the card's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..config import RunConfig, ScenarioConfig, build, knob
from ..errors import EvaltrailError

WHERE = "params.yaml: reproduce"


@dataclass(frozen=True)
class PublishedRow:
    benchmark: str
    """The benchmark as the card names it."""
    scenarios: list[str]
    """evaltrail scenarios measured; several are averaged (SmolLM2's "ARC" = mean of easy and challenge)."""
    metric: str
    """evaltrail metric compared with the card's number."""
    value: float = knob(min=0, max=100)
    """The published number, in points (0-100)."""
    shots: int = knob(min=0)
    """In-context examples the card used."""
    normalization: str
    """How the card normalizes option scores (as stated on the card, or "not stated")."""
    split: str
    """The split the card evaluated."""
    note: str | None = None
    """Anything else that differs, in words (e.g. where few-shot examples come from)."""
    sensitivity: str | None = None
    """None: a headline row, its protocol chosen before the run as the one the card most plausibly
    used. Else the alternative protocol this row measures, in words: shown with its own CI beside
    the headline, never counted as reproduced and never swapped in for a better score."""


@dataclass(frozen=True)
class Reproduction:
    name: str = knob(identifier=True)
    """The suite's name (conf/suite/<name>.yaml)."""
    model: str
    """The evaltrail model whose card is reproduced."""
    source: str
    """URL of the card the rows are copied from."""
    rows: list[PublishedRow]
    """The card's rows."""
    tolerance: float = knob(2.0, min=0)
    """Points |measured - published| may differ by and still count as reproduced."""
    note: str | None = None
    """What differs for every row (e.g. 4-bit quantized weights)."""
    settings: dict = field(default_factory=dict)
    """Card-wide settings, shown in the table header (harness, normalization...)."""


def parse(raw: dict | None, run: RunConfig) -> Reproduction | None:
    """The suite's `reproduce` block, checked against the run's scenarios, metrics and models."""
    if not raw:
        return None
    raw = dict(raw)
    rows = raw.pop("rows", None)
    if not isinstance(rows, list) or not rows:
        raise EvaltrailError(f"{WHERE}.rows: a non-empty list of published rows is required")
    parsed = [build(PublishedRow, r, f"{WHERE}.rows[{i}]") for i, r in enumerate(rows)]
    rep = build(Reproduction, {**raw, "rows": parsed}, WHERE)
    if rep.model not in run.model:
        raise EvaltrailError(f"{WHERE}.model: {rep.model!r} is not a model of this suite ({', '.join(run.models)})")
    for i, row in enumerate(rep.rows):
        for s in row.scenarios:
            if s not in run.scenario:
                raise EvaltrailError(f"{WHERE}.rows[{i}].scenarios: {s!r} is not a scenario of this suite")
            if row.metric not in run.scenario[s].metrics:
                raise EvaltrailError(
                    f"{WHERE}.rows[{i}].metric: {row.metric!r} is not scored on {s} "
                    f"({', '.join(run.scenario[s].metrics)})"
                )
    return rep


def protocol(cfg: ScenarioConfig) -> str:
    """How the run asks the model for its answer, in words: the column a reader compares with the
    harness the card names."""
    if cfg.method == "multiple_choice_separate":
        what = (
            "loglikelihood of the text after the blank, filled with each option"
            if cfg.partial
            else "loglikelihood of each option after the prompt"
        )
        what += ", calibrated" if cfg.calibration_prompt else ""
    elif cfg.method == "multiple_choice_joint":
        what = "options lettered in one prompt, the letter generated"
    elif cfg.method == "generation" and cfg.num_samples > 1:
        what = f"{cfg.num_samples} answers sampled at temperature {cfg.temperature:g}, up to {cfg.max_tokens} tokens"
    elif cfg.method == "generation":
        what = f"greedy generation, up to {cfg.max_tokens} tokens"
    else:
        what = cfg.method
    return f"{cfg.num_shots}-shot, {what}"


def _differences(row: PublishedRow, run: RunConfig, prepared: dict[str, dict], summaries: dict) -> list[str]:
    """Settings of this run that differ from the card's row, in words."""
    out = []
    for s in row.scenarios:
        cfg, rep = run.scenario[s], prepared[s]
        tag = f"{s}: " if len(row.scenarios) > 1 else ""
        if cfg.num_shots != row.shots:
            out.append(f"{tag}{cfg.num_shots}-shot (card {row.shots}-shot)")
        if cfg.eval_split != row.split:
            out.append(f"{tag}split {cfg.eval_split} (card {row.split})")
        if cfg.num_shots and cfg.train_split == cfg.eval_split:
            out.append(f"{tag}shots drawn from {cfg.train_split}, never the instance itself")
        rows = int(rep.get("loaded", {}).get(cfg.eval_split, 0))
        repeated = int(rep.get("repeated_rows", {}).get(cfg.eval_split, 0))
        n = int(summaries[s]["metrics"][row.metric]["n"])
        if rows and n < rows - repeated:
            out.append(f"{tag}seeded sample of {n:,} of {rows - repeated:,} instances")
        if repeated:  # the card's harness scores each row; a word-for-word repeat is one instance here
            out.append(f"{tag}{repeated:,} of the {rows:,} rows repeat another word for word: evaluated once")
    if row.note:
        out.append(row.note)
    return out


def table(
    rep: Reproduction, run: RunConfig, summaries: dict[tuple[str, str], dict], prepared: dict[str, dict]
) -> list[dict]:
    """One record per published row. Several scenarios are averaged with equal weight, their CI
    half-widths combined in quadrature (independent samples)."""
    records = []
    for row in rep.rows:
        cells = {s: summaries[(s, rep.model)] for s in row.scenarios}
        stats = [cells[s]["metrics"][row.metric] for s in row.scenarios]
        measured = 100 * sum(st["mean"] for st in stats) / len(stats)
        halves = [100 * (st["ci_high"] - st["ci_low"]) / 2 for st in stats if st["ci_low"] is not None]
        half = math.sqrt(sum(h * h for h in halves)) / len(stats) if len(halves) == len(stats) else None
        if len(stats) == 1 and half is not None:  # one scenario: its own (possibly asymmetric) interval
            low, high = 100 * stats[0]["ci_low"], 100 * stats[0]["ci_high"]
        else:
            low, high = (measured - half, measured + half) if half is not None else (None, None)
        delta = measured - row.value
        records.append(
            {
                "benchmark": row.benchmark,
                "scenarios": row.scenarios,
                "metric": row.metric,
                "shots": row.shots,
                "split": row.split,
                "normalization": row.normalization,
                "protocol": "; ".join(dict.fromkeys(protocol(run.scenario[s]) for s in row.scenarios)),
                "published": row.value,
                "measured": round(measured, 4),
                "ci_low": None if low is None else round(low, 4),
                "ci_high": None if high is None else round(high, 4),
                "n": sum(int(st["n"]) for st in stats),
                "delta": round(delta, 4),
                "within_tolerance": abs(delta) <= rep.tolerance,
                "published_in_ci": low is not None and low <= row.value <= high,
                "differs": _differences(row, run, prepared, cells),
                "sensitivity": row.sensitivity,
            }
        )
    return records


def _marked(record: dict) -> str:
    return f" (sensitivity: {record['sensitivity']})" if record.get("sensitivity") else ""


def to_markdown(
    rep: Reproduction | None, records: list[dict], model_sha256: str | None = None, engine: dict | None = None
) -> str:
    if rep is None:
        return (
            "# Reproduction\n\nThis suite reproduces no published result. Run a reproduction suite, e.g. "
            "`dvc exp run -S suite=reproduce_gemma3_270m_card`; tables from runs on this machine are in `published/`.\n"
        )
    headline = [r for r in records if not r.get("sensitivity")]
    ok = sum(r["within_tolerance"] for r in headline)
    in_ci = sum(r["published_in_ci"] for r in headline)
    extra = len(records) - len(headline)
    lines = [
        f"# Reproduction: {rep.name}",
        "",
        f"Model `{rep.model}`"
        + (f" (GGUF sha256 `{model_sha256}`)" if model_sha256 else "")
        + f" against its card: <{rep.source}>.",
        "",
    ]
    if engine:
        lines += [
            f"Computed by the pinned engine: llama-cpp-python {engine.get('llama_cpp_python')}, kernel profile "
            f"`{engine.get('profile')}`, build sha256 `{engine.get('sha256')}`. What the run cost (wall time, "
            "model seconds per row, this machine's CPU) is a measurement: `evaltrail costs`, published beside "
            "this table.",
            "",
        ]
    if rep.settings:
        lines += ["Card settings: " + "; ".join(f"{k}: {v}" for k, v in rep.settings.items()) + ".", ""]
    if rep.note:
        lines += [f"Differs on every row: {rep.note}.", ""]
    lines += [
        f"Points (0-100). Measured: mean [95% CI] over n instances. Tolerance ±{rep.tolerance:g} points; "
        f"**{ok} of {len(headline)}** rows within it, **{in_ci} of {len(headline)}** with the card's value "
        "inside the 95% CI"
        + (
            f" ({extra} sensitivity row{'s' if extra > 1 else ''}, marked, measure alternative protocols and count "
            "for nothing: each headline row's protocol was chosen before its run)."
            if extra
            else "."
        ),
        "",
        "| benchmark | card setting | evaltrail metric | evaltrail protocol | n | published | measured [95% CI] | "
        f"delta | within ±{rep.tolerance:g} | card value in CI | differs from the card |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in headline + [r for r in records if r.get("sensitivity")]:
        ci = f" [{r['ci_low']:.1f}, {r['ci_high']:.1f}]" if r["ci_low"] is not None else ""
        lines.append(
            f"| {r['benchmark']}{_marked(r)} | {r['shots']}-shot, {r['split']}, {r['normalization']} | "
            f"{r['metric']} on {' + '.join(r['scenarios'])} | {r.get('protocol') or '—'} | {r['n']:,} | "
            f"{r['published']:.1f} | "
            f"{r['measured']:.1f}{ci} | {r['delta']:+.1f} | {'yes' if r['within_tolerance'] else 'no'} | "
            f"{'yes' if r['published_in_ci'] else 'no'} | {'; '.join(r['differs']) or '—'} |"
        )
    return "\n".join(lines) + "\n"
