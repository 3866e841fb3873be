"""What the pipeline costs when there is (almost) nothing to do.

On a copy of a workspace where `dvc repro` (or `dvc exp run -S suite=...`) has completed:
no-op `dvc repro`, `dvc status`, and a metric change (one metric dropped from one scenario's
list in params.yaml) which must re-run score and aggregate stages only, never infer. Medians of
--repeats runs. The copy keeps the original workspace untouched.

    python bench/pipeline_overhead.py [--repo PATH] [--scenario hellaswag] [--metric ece_1_bin]
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

from common import ROOT, median, preamble, write_section  # noqa: E402

SKIP = {".venv", "mlruns", "bench", "__pycache__", ".pytest_cache"}


def _copy(src: str, dst: str) -> None:
    """DVC's cache files are read-only and never rewritten: hard-link them; copy everything else."""
    if f"{os.sep}.dvc{os.sep}cache{os.sep}" in src:
        os.link(src, dst)
    else:
        shutil.copy2(src, dst)


def timed(repo: Path, *args: str) -> tuple[float, str]:
    t0 = time.perf_counter()
    out = subprocess.run(["dvc", *args], cwd=repo, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if out.returncode:
        raise SystemExit(f"dvc {' '.join(args)} failed in {repo}:\n{out.stdout}{out.stderr}")
    return wall, out.stdout


def profile_status(repo: Path, top: int) -> list[str]:
    """Where a `dvc status` spends its time: py-spy samples, each function's inclusive share
    (the share of samples with it on the stack), DVC's own call chain only."""
    raw = repo / "status.pyspy"
    subprocess.run(["py-spy", "record", "--rate", "200", "--format", "raw", "--output", str(raw), "--", "dvc",
                    "status"], cwd=repo, capture_output=True, check=True)
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, default=ROOT, help="a workspace whose pipeline is up to date")
    ap.add_argument("--scenario", default="hellaswag", help="scenario whose metric list is changed")
    ap.add_argument("--metric", default="ece_1_bin", help="metric dropped from that scenario")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="also profile one `dvc status` with py-spy and list its N heaviest functions")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "ws"
        shutil.copytree(args.repo, repo, symlinks=True, copy_function=_copy, ignore=lambda d, names: [n for n in names if n in SKIP])
        os.environ.setdefault("MLFLOW_TRACKING_URI", f"sqlite:///{repo}/mlflow.db")
        first, out = timed(repo, "repro")
        if stages_run(out):
            raise SystemExit(f"{args.repo}: pipeline not up to date (ran {stages_run(out)}); run `dvc repro` there first")
        params = yaml.safe_load((repo / "params.yaml").read_text())
        n_stages = len(re.findall(r"^\S", subprocess.run(["dvc", "stage", "list"], cwd=repo, capture_output=True,
                                                           text=True).stdout, re.M))
        noop = [timed(repo, "repro")[0] for _ in range(args.repeats)]
        status = [timed(repo, "status")[0] for _ in range(args.repeats)]
        profile = profile_status(repo, args.profile) if args.profile else []
        param_bytes = (repo / "params.yaml").stat().st_size
        lock_bytes = (repo / "dvc.lock").stat().st_size

        metrics = params["scenario"][args.scenario]["metrics"]
        if args.metric not in metrics:
            raise SystemExit(f"scenario.{args.scenario}.metrics has no {args.metric}")
        changed = {**params, "scenario": {**params["scenario"], args.scenario: {
            **params["scenario"][args.scenario], "metrics": [m for m in metrics if m != args.metric]}}}
        original = (repo / "params.yaml").read_text()
        (repo / "params.yaml").write_text(yaml.safe_dump(changed, sort_keys=False))
        change_wall, change_out = timed(repo, "repro")
        (repo / "params.yaml").write_text(original)
        back_wall, back_out = timed(repo, "repro")
    ran, ran_back = stages_run(change_out), stages_run(back_out)
    infer = [s for s in ran + ran_back if s.startswith("infer")]
    lines = preamble(f"a copy of `{args.repo}` ({len(params['scenarios'])} scenarios x {len(params['models'])} "
                     f"models, {n_stages} stages).") + [
             "| what | wall s (median) | runs |", "|---|---|---|",
             f"| no-op `dvc repro` | {median(noop):.2f} | {args.repeats} (first after copying: {first:.2f}) |",
             f"| `dvc status` | {median(status):.2f} | {args.repeats} |",
             f"| drop `{args.metric}` from scenario.{args.scenario}.metrics, `dvc repro` | {change_wall:.2f} | 1: ran "
             f"{', '.join(ran)} |",
             f"| restore it, `dvc repro` | {back_wall:.2f} | 1: ran {', '.join(ran_back)} |", "",
             f"infer stages re-run by the metric change: {len(infer)}" + (f" ({', '.join(infer)})" if infer else "") + ".",
             "", f"params.yaml {param_bytes / 1e3:.0f} kB, dvc.lock {lock_bytes / 1e3:.0f} kB."]
    if profile:
        lines += ["", "Profile of one `dvc status` (py-spy, share of samples with the function on the stack):", "",
                  "| function | inclusive |", "|---|---|", *profile]
    print("\n".join(lines))
    write_section("pipeline_overhead", lines)
    if infer:
        raise SystemExit("a metric change re-ran inference")


if __name__ == "__main__":
    main()
