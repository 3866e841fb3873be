"""Shared-prefix reuse: tokens evaluated against the naive sum, the wall-time gain, and equality.

For each scenario x model the infer stage's loop runs twice on the same requests, with
`prefix_reuse` on (the default) and off. Reported: evaluated / naive tokens (target <= 0.55
on HellaSwag and ARC), wall seconds of each (median of --repeats), and the largest logprob
difference between the two completions tables (must be <= 1e-4; the backend is built to make
it exactly 0).

    python bench/prefix_reuse.py [--scenarios hellaswag arc_easy arc_challenge] [--instances 50]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from common import median, preamble, write_section  # noqa: E402
from workload import backend, requests, run_config, timed_infer  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", nargs="+", default=["hellaswag", "arc_easy", "arc_challenge"])
    ap.add_argument("--instances", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--models", nargs="+", default=["smollm2_135m_instruct", "gemma3_270m"])
    args = ap.parse_args()
    run = run_config("core")
    lines = preamble(
        f"{args.instances} instances per scenario, {args.repeats} interleaved repeats; naive = every "
        f"request evaluated from scratch."
    ) + [
        "| scenario | model | requests | naive tokens | evaluated with reuse | ratio | wall s without | "
        "wall s with | speed-up | max abs logprob diff |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for scenario in args.scenarios:
        prompts = requests(run, scenario, args.instances)
        for model in args.models:
            walls = {True: [], False: []}
            tables = {}
            for _ in range(args.repeats):
                for reuse in (False, True):
                    wall, tables[reuse] = timed_infer(
                        backend(run, model, prefix_reuse=reuse), prompts, f"reuse={reuse}"
                    )
                    walls[reuse].append(wall)
            naive = int(tables[False]["num_evaluated_tokens"].sum())
            used = int(tables[True]["num_evaluated_tokens"].sum())
            diff = float(np.max(np.abs(tables[True]["logprob"].to_numpy() - tables[False]["logprob"].to_numpy())))
            w0, w1 = median(walls[False]), median(walls[True])
            lines.append(
                f"| {scenario} | {model} | {len(prompts)} | {naive:,} | {used:,} | {used / naive:.3f} | "
                f"{w0:.1f} | {w1:.1f} | {w0 / w1:.2f}x | {diff:.1e} |"
            )
            print(lines[-1])
    write_section("prefix_reuse", lines)


if __name__ == "__main__":
    main()
