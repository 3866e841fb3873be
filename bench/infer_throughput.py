"""The infer stage's packed path against the best raw llama.cpp decode of the same engine.

For each model: a scenario's loglikelihood requests (HellaSwag by default) through
`loglikelihood_many`, exactly as infer runs them; reported: wall, tokens evaluated against the
ideal token-granular sharing (every request evaluated from its longest common token prefix with
the previous one, sorted) and against naive, evaluated tokens per second against the best raw
`llama_decode` rate over batch shapes and attention kernels (bench/batch_shape.py's measure, on
the same engine and threads), and the log-softmax's share of the wall time. With --generate N,
also greedy generation of N GSM8K prompts (needs EVALTRAIL_MIRROR): packed waves against one
sequence at a time (raw single-token decode steps, the engine's default context).

    python bench/infer_throughput.py [--scenario hellaswag] [--instances 200] [--generate 64]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from batch_shape import decode_rate  # noqa: E402
from common import preamble, require_idle, write_section  # noqa: E402
from workload import backend, requests, run_config  # noqa: E402

RAW_SHAPES = (32, 60, 128, 512)


def ideal_tokens(jobs) -> int:
    toks = sorted(j.tokens for j in jobs)
    total = len(toks[0])
    for a, b in zip(toks, toks[1:]):
        k = 0
        while k < min(len(a), len(b)) and a[k] == b[k]:
            k += 1
        total += len(b) - k
    return total


def best_raw(b, tokens: list[int]) -> tuple[float, str]:
    """The fastest raw decode of `tokens` over RAW_SHAPES x flash on/off (logits every 2nd row)."""
    runs = {
        (s, f): decode_rate(b.lib, b.llm._model.model, tokens, s, f, b.threads, "half")
        for s in RAW_SHAPES
        for f in (True, False)
    }
    (s, f), rate = max(runs.items(), key=lambda kv: kv[1])
    return rate, f"n_ubatch {s}, flash {'on' if f else 'off'}"


def loglikelihoods(run, model: str, prompts) -> str:
    from evaltrail.backends import llama_cpp

    b = backend(run, model)
    items = list(zip(prompts.prompt, prompts.continuation))
    jobs = [b._ll_job(p, c)[0] for p, c in items]
    spent = [0.0]
    inner = llama_cpp._log_softmax_at

    def timed(*args, **kw):
        t0 = time.perf_counter()
        try:
            return inner(*args, **kw)
        finally:
            spent[0] += time.perf_counter() - t0

    llama_cpp._log_softmax_at = timed
    try:
        t0 = time.perf_counter()
        answers = dict(b.loglikelihood_many(items))
        wall = time.perf_counter() - t0
    finally:
        llama_cpp._log_softmax_at = inner
    evaluated = sum(a["num_evaluated_tokens"] for a in answers.values())
    naive = sum(len(j.tokens) for j in jobs)
    ideal = ideal_tokens(jobs)
    stream = [t for j in jobs[:200] for t in j.tokens][:2048]
    raw, how = best_raw(b, stream)
    rate = evaluated / wall
    line = (
        f"| {model} | {len(items):,} | {wall:.1f} | {evaluated:,} | {ideal:,} | {evaluated / ideal:.3f} | "
        f"{evaluated / naive:.3f} | {rate:.0f} | {raw:.0f} ({how}) | {rate / raw:.2f} | "
        f"{100 * spent[0] / wall:.1f}% |"
    )
    print(line, flush=True)
    return line


def one_at_a_time(b, tokens: list[int], n_out: int, ctx, batch) -> None:
    """Greedy decoding of one prompt alone, as before packing: the prompt, then one token per decode."""
    import numpy as np

    L = b.lib
    L.llama_memory_clear(L.llama_get_memory(ctx), True)
    for lo in range(0, len(tokens), 512):
        chunk = tokens[lo : lo + 512]
        for k, t in enumerate(chunk):
            batch.token[k], batch.pos[k], batch.n_seq_id[k] = t, lo + k, 1
            batch.seq_id[k][0], batch.logits[k] = 0, lo + k == len(tokens) - 1
        batch.n_tokens = len(chunk)
        L.llama_decode(ctx, batch)
    for pos in range(len(tokens), len(tokens) + n_out):
        row = np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, -1), shape=(b.n_vocab,))
        batch.token[0], batch.pos[0], batch.n_seq_id[0] = int(row.argmax()), pos, 1
        batch.seq_id[0][0], batch.logits[0], batch.n_tokens = 0, True, 1
        L.llama_decode(ctx, batch)


def generation(run, model: str, prompts, max_tokens: int) -> str:
    b = backend(run, model)
    items = [(p, max_tokens, list(s)) for p, s in zip(prompts.prompt, prompts.stop)]
    t0 = time.perf_counter()
    packed = dict(b.generate_many(items))
    wall = time.perf_counter() - t0
    produced = sum(a["num_output_tokens"] for a in packed.values())
    L = b.lib
    p = L.llama_context_default_params()
    p.n_ctx, p.n_batch, p.n_threads, p.n_threads_batch = 2048, 512, b.threads, b.threads
    ctx, batch = L.llama_init_from_model(b.llm._model.model, p), L.llama_batch_init(512, 0, 1)
    try:  # as many tokens per prompt as the packed run produced
        t0 = time.perf_counter()
        for i, (prompt, _, _) in enumerate(items):
            one_at_a_time(b, b._gen_prep(prompt, max_tokens)[0], packed[i]["num_output_tokens"], ctx, batch)
        single = time.perf_counter() - t0
    finally:
        L.llama_batch_free(batch)
        L.llama_free(ctx)
    line = (
        f"| {model} | {len(items)} | {max_tokens} | {produced:,} | {wall:.1f} | {produced / wall:.1f} | "
        f"{single:.1f} | {produced / single:.1f} | {single / wall:.2f} |"
    )
    print(line, flush=True)
    return line


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="hellaswag")
    ap.add_argument("--instances", type=int, default=200)
    ap.add_argument("--generate", type=int, default=0, help="GSM8K prompts to generate for (0: skip)")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--models", nargs="+", default=["smollm2_135m_instruct", "gemma3_270m"])
    ap.add_argument("--max-load", type=float, default=0.5, help="refuse to start above this load average")
    args = ap.parse_args()
    require_idle(args.max_load)
    run = run_config("core")
    prompts = requests(run, args.scenario, args.instances)
    prompts = prompts[prompts.method == "loglikelihood"]
    lines = preamble(
        f"{args.scenario}, {args.instances} instances ({len(prompts)} loglikelihood requests), cold, one run per model."
    ) + [
        "| model | requests | wall s | tokens evaluated | ideal (token-granular) | evaluated / ideal | "
        "evaluated / naive | evaluated tok/s | best raw decode tok/s | ratio | log-softmax share |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [loglikelihoods(run, m, prompts) for m in args.models]
    if args.generate:
        gsm = requests(run, "gsm8k", args.generate)
        lines += [
            "",
            f"Greedy generation, {args.generate} GSM8K prompts (5-shot), up to {args.max_tokens} tokens:",
            "",
            "| model | prompts | max tokens | tokens generated | packed wall s | packed tok/s | one at a time wall s "
            "| one at a time tok/s | speed-up |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        lines += [generation(run, m, gsm, args.max_tokens) for m in args.models]
    write_section("infer_throughput", lines)


if __name__ == "__main__":
    main()
