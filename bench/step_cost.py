"""What one greedy-generation step costs per sequence, by parallel sequences and by cache cells.

Parallel generation pays off when a decode step's cost is nearly flat in the number of sequences
(weights read once per step). This measures whether it is on this machine: the packed backend's
own context decodes one token for each of `rows` sequences (each with its own 8-token history,
logits at every row, as generation reads them) after `cells` cells of another sequence fill the
unified KV cache (every row's attention walks them, masked). Reported: milliseconds per
sequence per step, median of --repeats steps.

    python bench/step_cost.py [--models smollm2_135m_instruct gemma3_270m] [--threads 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import median, preamble, require_idle, write_section  # noqa: E402
from workload import backend, run_config  # noqa: E402

ROWS = (8, 32, 56)
CELLS = (0, 2048, 6144)
HISTORY = 8


def step_costs(model: str, threads: int, repeats: int) -> list[str]:
    """One table row per cache fill: ms per sequence at each ROWS."""
    b = backend(run_config("core"), model, n_threads=threads)  # owns the model: keep it alive
    packer = b._packed()
    size, lines = packer.size, []
    for cells in CELLS:
        packer._rebuild(0, 0)
        for lo in range(0, cells, size):  # sequence 0: the cells every row walks past
            packer._decode([(100, lo + k, [0], False) for k in range(size)], size)
        nxt = {}
        for s in range(1, max(ROWS) + 1):
            packer._decode([(100, k, [s], False) for k in range(HISTORY)], HISTORY)
            nxt[s] = HISTORY
        costs = []
        for rows in ROWS:
            times = []
            for _ in range(repeats):
                entries = [(100, nxt[s], [s], True) for s in range(1, rows + 1)]
                for s in range(1, rows + 1):
                    nxt[s] += 1
                t0 = time.perf_counter()
                packer._decode(entries, 0)
                times.append(time.perf_counter() - t0)
            costs.append(1000 * median(times) / rows)
        lines.append(f"| {model} | {packer.top:,} | " + " | ".join(f"{c:.2f}" for c in costs) + " |")
        print(lines[-1], flush=True)
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["smollm2_135m_instruct", "gemma3_270m"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--max-load", type=float, default=0.5, help="refuse to start above this load average")
    args = ap.parse_args()
    require_idle(args.max_load)
    lines = preamble(
        f"{args.threads} threads, one token per sequence per step, logits at every row, median of "
        f"{args.repeats} steps; ms per sequence (lower is better)."
    ) + [
        "| model | cells in the cache | " + " | ".join(f"{r} sequences" for r in ROWS) + " |",
        "|---|---|" + "---|" * len(ROWS),
    ]
    for model in args.models:
        lines += step_costs(model, args.threads, args.repeats)
    write_section("step_cost", lines)


if __name__ == "__main__":
    main()
