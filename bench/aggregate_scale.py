"""Aggregation at scale: per-instance scores of 10k, 100k and 1M rows through summaries, the
leaderboard, pairwise ratings and paired bootstraps.

Synthetic scores in the real schema (SCORES_SCHEMA) are written as the score stage writes them:
2 models x 5 scenarios x 4 metrics (0/1 accuracy, a continuous score, two worst cases) per
original instance. A child process per size then reads them and runs exactly what the score
stage's summary and the aggregate stage compute from per-instance rows, with the run's default
2,000 bootstrap samples; its wall time and peak RSS are reported (median of --repeats).

    python bench/aggregate_scale.py [--sizes 10000 100000 1000000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from common import median, preamble, write_section  # noqa: E402

MODELS = ["model_a", "model_b"]
SCENARIOS = [f"scenario_{i}" for i in range(5)]
METRICS = ["exact_match", "f1_score", "exact_match/robustness", "exact_match/fairness"]


def synthesize(rows: int, out: Path) -> None:
    """Write scores Parquet files totalling `rows` rows, seeded."""
    import pyarrow.parquet as pq

    from evaltrail.metrics.scoring import scores_table

    rng = np.random.default_rng(0)
    per_cell = rows // (len(MODELS) * len(SCENARIOS) * len(METRICS))
    ids = np.array([f"{i:016x}" for i in range(per_cell)])
    for s in SCENARIOS:
        skill = rng.uniform(0.2, 0.8, per_cell)  # shared instance difficulty, so the pairs correlate
        for k, m in enumerate(MODELS):
            correct = (rng.uniform(size=per_cell) < skill + 0.05 * k).astype(float)
            f1 = np.clip(correct * 0.7 + rng.uniform(0, 0.3, per_cell), 0, 1)
            worst = correct * (rng.uniform(size=per_cell) < 0.8)
            frame = pd.DataFrame(
                {
                    "instance_id": np.tile(ids, len(METRICS)),
                    "metric": np.repeat(METRICS, per_cell),
                    "value": np.concatenate([correct, f1, worst, worst]),
                    "perturbation": None,
                    "trial": np.zeros(per_cell * len(METRICS), np.int32),
                    "original_id": np.tile(ids, len(METRICS)),
                }
            )
            (out / s).mkdir(parents=True, exist_ok=True)
            pq.write_table(scores_table(frame), out / s / f"{m}.parquet")


def child(directory: Path) -> dict:
    """Read every scores file and compute summaries, leaderboard, ratings, differences."""
    from evaltrail.aggregate import pairwise
    from evaltrail.aggregate.leaderboard import leaderboard
    from evaltrail.config import ScenarioConfig
    from evaltrail.metrics.scoring import summarize

    t0 = time.perf_counter()
    scores, summaries = {}, {}
    for s in SCENARIOS:
        cfg = ScenarioConfig(
            name=s,
            method="generation",
            eval_split="test",
            metrics=["exact_match", "f1_score"],
            main_metric="exact_match",
            sources=[],
        )
        for m in MODELS:
            sc = pd.read_parquet(directory / s / f"{m}.parquet")
            scores[(s, m)] = sc
            summaries[(s, m)] = {**summarize(sc, {}, cfg, 2000, 0), "model": m}
    board = leaderboard(summaries)
    outcomes = pairwise.main_outcomes(scores, summaries)
    table, fit = pairwise.ratings(outcomes, 2000, 0)
    diffs = pairwise.differences(outcomes, 2000, 0)
    wall = time.perf_counter() - t0
    return {
        "wall_s": wall,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rows": int(sum(len(v) for v in scores.values())),
        "board_rows": len(board),
        "fit": fit,
        "battles": int(table["battles"].sum() // 2) if len(table) else 0,
        "pairs": len(diffs),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", type=int, default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return
    lines = preamble(
        f"{len(MODELS)} models x {len(SCENARIOS)} scenarios x {len(METRICS)} metrics; bootstrap 2,000 "
        f"samples; a fresh process per run."
    ) + [
        "| per-instance rows | battles | wall s (median) | peak RSS MB (median) "
        "| added wall s over the previous size |",
        "|---|---|---|---|---|",
    ]
    previous = None
    for size in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            synthesize(size, Path(tmp))
            runs = []
            for _ in range(args.repeats):
                out = subprocess.run(
                    [sys.executable, __file__, "--child", tmp], capture_output=True, text=True, check=True
                )
                runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        wall, rss = median([r["wall_s"] for r in runs]), median([r["peak_rss_mb"] for r in runs])
        lines.append(
            f"| {runs[0]['rows']:,} | {runs[0]['battles']:,} | {wall:.2f} | {rss:.0f} | "
            f"{'—' if previous is None else f'{wall - previous:+.2f}'} |"
        )
        previous = wall
        print(lines[-1])
    write_section("aggregate_scale", lines)


if __name__ == "__main__":
    main()
