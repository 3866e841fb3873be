"""Where the infer stage's time goes, and how much prefix reuse could save at best.

1. py-spy (native frames) samples the infer loop on HellaSwag with prefix reuse off, per model:
   the share of samples inside llama.cpp's decode, inside the log-softmax over the vocabulary
   that scoring needs (the engine's kernel), and elsewhere.
2. The ideal prefix-reuse ratio: tokens evaluated if every request reused its longest common
   token prefix with the previous one, over the naive sum (bench/infer_throughput.py compares
   the packed path's count with it).

    python bench/profile_infer.py [--instances 30] [--models ...]
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import preamble, write_section  # noqa: E402
from workload import backend, requests, run_config, timed_infer  # noqa: E402

FRAMES = {"llama.cpp decode": "llama_decode", "log-softmax (the engine's kernel)": "_log_softmax_at"}


def infer_once(model: str, scenario: str, n: int) -> None:
    """The child process py-spy samples: the infer loop alone, prefix reuse off."""
    run = run_config()
    wall, table = timed_infer(backend(run, model, prefix_reuse=False), requests(run, scenario, n))
    print(f"{model}: {int(table['num_evaluated_tokens'].sum())} tokens in {wall:.1f} s")


def shares(raw: Path) -> dict[str, float]:
    """Inclusive share of FRAMES among the samples inside timed_infer."""
    inside, hits = 0, collections.Counter()
    for line in raw.read_text().splitlines():
        stack, n = line.rsplit(" ", 1)
        frames = {f.split(" (")[0] for f in stack.split(";")}
        if "timed_infer" in frames:
            inside += int(n)
            for label, frame in FRAMES.items():
                hits[label] += int(n) if frame in frames else 0
    return {label: hits[label] / inside for label in FRAMES} | {"samples": inside}


def ideal_ratio(model: str, scenario: str, n: int) -> tuple[int, int]:
    """(naive tokens, tokens with token-granular longest-common-prefix reuse) in sorted order."""
    run = run_config()
    b = backend(run, model, prefix_reuse=False)
    prompts = requests(run, scenario, n)
    seqs = []
    for p, c in sorted(zip(prompts["prompt"], prompts["continuation"])):
        ctx = p.rstrip(" ")
        seqs.append(b._tokens(ctx + p[len(ctx) :] + c))
    ideal, prev = 0, []
    for t in seqs:
        k = 0
        while k < min(len(t), len(prev)) and t[k] == prev[k]:
            k += 1
        ideal += len(t) - min(k, len(t) - 1)  # the last token is always evaluated (it gives logits)
        prev = t
    return sum(map(len, seqs)), ideal


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=int, default=30)
    ap.add_argument("--models", nargs="+", default=["smollm2_135m_instruct", "gemma3_270m"])
    ap.add_argument("--child", nargs=2, metavar=("MODEL", "SCENARIO"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return infer_once(*args.child, args.instances)
    lines = preamble(f"HellaSwag, {args.instances} instances, prefix reuse off; py-spy --native at 50 Hz.") + [
        "| model | samples in the infer loop | " + " | ".join(FRAMES) + " | elsewhere |",
        "|---|---|" + "---|" * (len(FRAMES) + 1),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models:
            raw = Path(tmp) / f"{model}.txt"
            subprocess.run(
                [
                    "py-spy",
                    "record",
                    "--native",
                    "--rate",
                    "50",
                    "--format",
                    "raw",
                    "--output",
                    str(raw),
                    "--",
                    sys.executable,
                    __file__,
                    "--instances",
                    str(args.instances),
                    "--child",
                    model,
                    "hellaswag",
                ],
                check=True,
                capture_output=True,
            )
            sh = shares(raw)
            rest = 1 - sum(sh[k] for k in FRAMES)
            lines.append(
                f"| {model} | {sh['samples']} | "
                + " | ".join(f"{100 * sh[k]:.0f}%" for k in FRAMES)
                + f" | {100 * rest:.0f}% |"
            )
    lines += [
        "",
        "Prefix reuse at best (token-granular longest common prefix with the previous request, "
        "sorted order), SmolLM2's tokenizer:",
        "",
        "| scenario | naive tokens | ideal | ideal ratio |",
        "|---|---|---|---|",
    ]
    for scenario in ("hellaswag", "arc_challenge"):
        naive, ideal = ideal_ratio(args.models[0], scenario, args.instances)
        lines.append(f"| {scenario} | {naive:,} | {ideal:,} | {ideal / naive:.3f} |")
    print("\n".join(lines))
    write_section("profile_infer", lines)


if __name__ == "__main__":
    main()
