"""What the pipeline costs when there is (almost) nothing to do.

On a copy of a workspace where `dvc repro` (or `dvc exp run -S suite=...`) has completed:
no-op `dvc repro`, `dvc status`, and a metric change (one metric dropped from one scenario's
list in params.yaml) which must re-run score and aggregate stages only, never infer. Medians of
--repeats runs. The copy keeps the original workspace untouched.

    python bench/pipeline_overhead.py [--repo PATH [PATH ...]] [--scenario hellaswag] [--metric ece_1_bin]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import yaml  # noqa: E402
from common import ROOT, command, git_commit, machine, median, require_idle, write_section  # noqa: E402

SKIP = {".venv", "mlruns", "bench", "__pycache__", ".pytest_cache"}


def _copy(src: str, dst: str) -> None:
    """DVC's cache files are read-only and never rewritten: hard-link them; copy everything else."""
    if f"{os.sep}.dvc{os.sep}cache{os.sep}" in src:
        os.link(src, dst)
    else:
        shutil.copy2(src, dst)


def timed(repo: Path, *args: str) -> tuple[float, str]:
    """`dvc ARGS` in `repo`, whose stages import that workspace's own src/ (each copy is measured
    with the code it holds)."""
    env = {**os.environ, "PYTHONPATH": str(repo / "src")}
    t0 = time.perf_counter()
    out = subprocess.run(["dvc", *args], cwd=repo, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if out.returncode:
        raise SystemExit(f"dvc {' '.join(args)} failed in {repo}:\n{out.stdout}{out.stderr}")
    return wall, out.stdout


def profile_status(repo: Path, top: int) -> list[str]:
    """Where a `dvc status` spends its time: py-spy samples, each function's inclusive share
    (the share of samples with it on the stack), DVC's own call chain only."""
    raw = repo / "status.pyspy"
    subprocess.run(
        ["py-spy", "record", "--rate", "200", "--format", "raw", "--output", str(raw), "--", "dvc", "status"],
        cwd=repo,
        capture_output=True,
        check=True,
    )
    incl: dict[str, int] = {}
    total = 0
    for line in raw.read_text().splitlines():
        stack, n = line.rsplit(" ", 1)
        total += int(n)
        for name in {f.split(" (")[0] for f in stack.split(";")}:
            incl[name] = incl.get(name, 0) + int(n)
    generic = {"<module>", "main", "wrapper", "run", "do_run", "_decorator", "__call__"}
    ranked = sorted(((v, k) for k, v in incl.items() if not any(g in k for g in generic)), reverse=True)
    return [f"| `{name}` | {100 * v / total:.0f}% |" for v, name in ranked[:top]]


def stages_run(output: str) -> list[str]:
    return re.findall(r"Running stage '([^']+)'", output)


def measure(src: Path, args: argparse.Namespace) -> dict:
    """No-op repro, status and a metric change on a copy of workspace `src`."""
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "ws"
        shutil.copytree(
            src, repo, symlinks=True, copy_function=_copy, ignore=lambda d, names: [n for n in names if n in SKIP]
        )
        os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{repo}/mlflow.db"
        first, out = timed(repo, "repro")
        if stages_run(out):
            raise SystemExit(f"{src}: pipeline not up to date (ran {stages_run(out)}); run `dvc repro` there first")
        params = yaml.safe_load((repo / "params.yaml").read_text())
        got = {
            "src": src,
            "first": first,
            "params": params,
            "stages": len(re.findall(r"^\S", timed(repo, "stage", "list")[1], re.M)),
            "noop": [timed(repo, "repro")[0] for _ in range(args.repeats)],
            "status": [timed(repo, "status")[0] for _ in range(args.repeats)],
            "profile": profile_status(repo, args.profile) if args.profile else [],
            "params_kB": (repo / "params.yaml").stat().st_size / 1e3,
            "lock_kB": (repo / "dvc.lock").stat().st_size / 1e3,
        }
        metrics = params["scenario"][args.scenario]["metrics"]
        if args.metric not in metrics:
            raise SystemExit(f"scenario.{args.scenario}.metrics has no {args.metric}")
        changed = {
            **params,
            "scenario": {
                **params["scenario"],
                args.scenario: {
                    **params["scenario"][args.scenario],
                    "metrics": [m for m in metrics if m != args.metric],
                },
            },
        }
        original = (repo / "params.yaml").read_text()
        (repo / "params.yaml").write_text(yaml.safe_dump(changed, sort_keys=False))
        got["change"], out = timed(repo, "repro")
        got["ran"] = stages_run(out)
        (repo / "params.yaml").write_text(original)
        got["back"], out = timed(repo, "repro")
        got["ran_back"] = stages_run(out)
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--repo",
        type=Path,
        nargs="+",
        default=[ROOT],
        help="workspaces whose pipelines are up to date (e.g. the same suite before and after a change)",
    )
    ap.add_argument("--scenario", default="hellaswag", help="scenario whose metric list is changed")
    ap.add_argument("--metric", default="ece_1_bin", help="metric dropped from that scenario")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="also profile one `dvc status` with py-spy and list its N heaviest functions",
    )
    ap.add_argument("--max-load", type=float, default=0.5, help="refuse to start above this load average")
    args = ap.parse_args()
    require_idle(args.max_load)
    head = machine()  # its load average: the one before any measurement
    runs = [measure(src, args) for src in args.repo]
    what = "; ".join(
        f"a copy of `{r['src']}` ({len(r['params']['scenarios'])} scenarios x "
        f"{len(r['params']['models'])} models, {r['stages']} stages)"
        for r in runs
    )
    cols = " | ".join(f"`{r['src'].name}`" for r in runs)
    lines = [head, "", f"`{command()}` at commit {git_commit()}: {what}.", ""] + [
        f"| what | {cols} |",
        "|---" * (len(runs) + 1) + "|",
        f"| no-op `dvc repro`, median of {args.repeats} (s) | "
        + " | ".join(f"{median(r['noop']):.2f}" for r in runs)
        + " |",
        "| the same, first after copying (s) | " + " | ".join(f"{r['first']:.2f}" for r in runs) + " |",
        f"| `dvc status`, median of {args.repeats} (s) | "
        + " | ".join(f"{median(r['status']):.2f}" for r in runs)
        + " |",
        f"| drop `{args.metric}` from scenario.{args.scenario}.metrics, `dvc repro` (s) | "
        + " | ".join(f"{r['change']:.2f}" for r in runs)
        + " |",
        "| restore it, `dvc repro` (s) | " + " | ".join(f"{r['back']:.2f}" for r in runs) + " |",
        "| params.yaml, dvc.lock (kB) | "
        + " | ".join(f"{r['params_kB']:.0f}, {r['lock_kB']:.0f}" for r in runs)
        + " |",
        "",
    ]
    infer = []
    for r in runs:
        lines.append(
            f"`{r['src'].name}`: the metric change ran {', '.join(r['ran'])}; restoring it ran "
            f"{', '.join(r['ran_back'])}."
        )
        infer += [s for s in r["ran"] + r["ran_back"] if s.startswith("infer")]
    lines += [
        "",
        f"infer stages re-run by the metric change: {len(infer)}" + (f" ({', '.join(infer)})" if infer else "") + ".",
    ]
    for r in runs:
        if r["profile"]:
            lines += [
                "",
                f"Profile of one `dvc status` in `{r['src'].name}` (py-spy, share of samples with the "
                "function on the stack):",
                "",
                "| function | inclusive |",
                "|---|---|",
                *r["profile"],
            ]
    print("\n".join(lines))
    write_section("pipeline_overhead", lines)
    if infer:
        raise SystemExit("a metric change re-ran inference")


if __name__ == "__main__":
    main()
