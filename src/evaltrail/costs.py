"""What a run cost on this machine: model seconds, KV-cache reuse, throughput, memory.

These are measurements, not results: they depend on the CPU, its load and the request cache's
history, so no DVC output holds them and no score or leaderboard reads them. infer writes them to
results/costs/<scenario>/<model>.json, which dvc.yaml declares as top-level metrics: `dvc metrics
show` lists them and `dvc metrics diff` compares two machines, while every deterministic artifact
stays byte-identical across machines with the pinned engine.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import pandas as pd

MEASURED = ("runtime_s", "evaluated_tokens", "tokens_per_s")
"""Per-request quantities of the machine and the run's history (HELM's measured efficiency):
recorded here, never scored. A scenario that lists one as a metric gets a one-line error."""


def cpu_name() -> str:
    """This machine's CPU as the OS names it (Linux: /proc/cpuinfo's model name) and its logical
    cores: what a reader of a published cost needs to weigh its seconds."""
    name = ""
    try:
        name = next(
            (
                ln.split(":", 1)[1].strip()
                for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")
            ),
            "",
        )
    except OSError:
        pass
    return f"{name or platform.processor() or platform.machine()}, {os.cpu_count()} logical cores"


def measure(answers: pd.DataFrame) -> dict:
    """Totals over one cell's answers as the backend returned them (with runtime_s and
    num_evaluated_tokens): model seconds, tokens evaluated against those sent, tokens per second."""
    seconds = float(answers["runtime_s"].sum())
    sent = int(answers["num_prompt_tokens"].sum())
    evaluated = int(answers["num_evaluated_tokens"].sum())
    output = int(answers["num_output_tokens"].sum())
    n = len(answers)
    return {
        "model_s": round(seconds, 3),
        "s_per_request": round(seconds / n, 6) if n else None,
        "prompt_tokens": sent,
        "evaluated_tokens": evaluated,
        "evaluated_fraction": round(evaluated / sent, 4) if sent else None,  # < 1: a reused KV prefix
        "output_tokens": output,
        "tokens_per_s": round((evaluated + output) / seconds, 2) if seconds > 0 else None,
    }


def costs_markdown(cells: dict[tuple[str, str], dict]) -> str:
    """A run's measurements as Markdown, one row per (scenario, model) with its results/costs
    record: requests, how many were computed in this run, the model seconds of every answer (the
    answers' own runtime_s, kept with a cached answer from when it was computed), this run's wall
    time and peak memory, and the kernels and engine that computed them. A measurement of this
    machine and the cache's history: publish it beside a table, never inside one."""
    cpus = sorted({c["cpu"] for c in cells.values() if c.get("cpu")})
    lines = [f"Measured on: {'; '.join(cpus)}.", ""] if cpus else []
    lines += [
        "| scenario | model | requests | computed in this run | model seconds (all answers) | wall s (this run) "
        "| peak RSS MB | CPU kernels | engine |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    total = wall = 0.0
    for (s, m), c in sorted(cells.items()):
        seconds = (c.get("measured") or {}).get("model_s") or 0.0
        total += seconds
        wall += c.get("wall_s", 0)
        engine = (c.get("identity") or {}).get("engine") or {}
        eng = f"{engine.get('profile', '?')} `{str(engine.get('sha256', '?'))[:12]}`" if engine else "—"
        flags = str(c.get("cpu_kernels", "")).removeprefix("CPU :").strip(" |").split(" | ")
        kernels = " ".join(k.split(" = ")[0].strip() for k in flags if k.strip().endswith("= 1"))
        lines.append(
            f"| {s} | {m} | {c.get('requests', 0):,} | {c.get('computed', 0):,} | {seconds:,.0f} | "
            f"{c.get('wall_s', 0):,.0f} | {c.get('peak_rss_mb', 0):,.0f} | {kernels or '—'} | "
            f"{eng} |"
        )
    lines.append(f"| **all** | | | | {total:,.0f} | {wall:,.0f} | | | |")
    return "\n".join(lines) + "\n"
