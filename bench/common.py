"""Shared by the benchmarks: the machine line, medians, and bench/RESULTS.md sections.

Benchmarks run from the repository root with the project installed (`pip install -e .`); they
are not part of the test run. Each owns one section of bench/RESULTS.md and rewrites only it.
"""

from __future__ import annotations

import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "RESULTS.md"
HEADER = (
    "# Benchmarks\n\nEach section is written by the script it names (`python bench/<script>.py`), "
    "with the machine it ran on. Medians of several runs; ratios are measured within one run.\n"
)


def machine() -> str:
    """One line: CPU model, cores, RAM, Python and llama-cpp-python versions, date."""
    cpu = platform.processor() or platform.machine()
    try:
        info = Path("/proc/cpuinfo").read_text()
        cpu = re.search(r"model name\s*:\s*(.*)", info).group(1).strip()
        flags = re.search(r"flags\s*:\s*(.*)", info).group(1).split()
        cpu += " (AVX-512)" if "avx512f" in flags else " (AVX2)" if "avx2" in flags else ""
    except (OSError, AttributeError):
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    try:
        from evaltrail import engine

        ident = engine.identity()
        llama = f"{ident['llama_cpp_python']} engine {ident['profile']} {ident['sha256'][:12]}"
    except Exception:  # noqa: BLE001 - no built engine: the line says so
        llama = "absent (run `dvc repro build_engine`)"
    load = os.getloadavg()[0]
    return (
        f"machine: {cpu}, {os.cpu_count()} cores, {mem:.0f} GiB RAM, Python {platform.python_version()}, "
        f"llama-cpp-python {llama}, load average {load:.2f} at the start, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )


def require_idle(max_load: float = 0.5) -> None:
    """Refuse to measure on a busy machine: llama.cpp's threads wait for each other, so another
    process on a core makes every figure a measurement of the contention instead."""
    load = os.getloadavg()[0]
    if load > max_load:
        raise SystemExit(
            f"bench: 1-minute load average {load:.2f} > {max_load}: the machine is busy; "
            f"wait for it to be idle (or pass a higher limit to require_idle)"
        )


def median(xs) -> float:
    return float(statistics.median(xs))


def write_section(name: str, lines: list[str]) -> None:
    """Replace (or append) the section `## name` of bench/RESULTS.md."""
    text = RESULTS.read_text(encoding="utf-8") if RESULTS.exists() else HEADER
    body = f"## {name}\n\n" + "\n".join(lines).rstrip() + "\n"
    pattern = re.compile(rf"^## {re.escape(name)}\n.*?(?=^## |\Z)", re.S | re.M)
    text = pattern.sub(lambda _: body + "\n", text) if pattern.search(text) else text.rstrip() + "\n\n" + body
    RESULTS.write_text(text.rstrip() + "\n", encoding="utf-8")
    print(f"-> {RESULTS.relative_to(ROOT)} ## {name}")


def preamble(what: str) -> list[str]:
    """Print the machine line; return a section's opening lines: machine, command, commit, `what`."""
    head = machine()
    print(head)
    return [head, "", f"`{command()}` at commit {git_commit()}: {what}", ""]


def git_commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def command() -> str:
    return "python " + " ".join(
        [str(Path(sys.argv[0]).relative_to(ROOT)) if Path(sys.argv[0]).is_absolute() else sys.argv[0], *sys.argv[1:]]
    )
