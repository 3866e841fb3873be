"""The infer stage against raw llama.cpp `eval` on the same token stream.

Both sides get the same prompts (HellaSwag by default), the same weights, context, batch size
and threads. The infer side runs `run_requests` exactly as the stage does (request cache,
completions table) with prefix reuse off, so both evaluate every token of every request; its
token stream is read back from the KV cache after each request and fed to a raw
`llama_cpp.Llama.eval`, once with logits for each batch's last token only and once with
logits_all. Reported: tokens/s of each (median of --repeats runs, interleaved), the ratios
(target >= 0.95), and the infer stage with prefix reuse on.

    python bench/infer_throughput.py [--scenario hellaswag] [--instances 50] [--repeats 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import llama_cpp  # noqa: E402

from common import median, preamble, write_section  # noqa: E402
from workload import backend, requests, run_config, threads, timed_infer, weights  # noqa: E402


def infer_side(run, model, prompts, **changes) -> tuple[float, int, list[list[int]]]:
    """(wall seconds, tokens evaluated, token sequences) of the infer stage's own loop."""
    b = backend(run, model, **changes)
    seqs: list[list[int]] = []
    original = b.loglikelihood

    def recording(prompt, continuation):  # read the evaluated sequence back from the KV cache
        out = original(prompt, continuation)
        seqs.append(list(b.llm.input_ids[: b.llm.n_tokens]))
        return out

    b.loglikelihood = recording
    wall, table = timed_infer(b, prompts)
    return wall, int(table["num_evaluated_tokens"].sum()), seqs


def raw_side(run, model, seqs: list[list[int]], logits_all: bool = False) -> float:
    """Wall seconds of llama-cpp-python's own eval over the same sequences, same settings: logits
    of each batch's last token only (less than a score needs), or of every token (`logits_all`,
    what scoring with plain `eval` takes)."""
    path, _ = weights(run, model)
    cfg, n = run.model[model], threads(run, model)
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=cfg.n_ctx, n_batch=cfg.n_batch, n_threads=n,
                          n_threads_batch=n, logits_all=logits_all, verbose=False)
    t0 = time.perf_counter()
    for tokens in seqs:
        llm.reset()
        llm.eval(tokens)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="hellaswag")
    ap.add_argument("--instances", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--models", nargs="+", default=["smollm2_135m_instruct", "gemma3_270m"])
    args = ap.parse_args()
    run = run_config("core")
    prompts = requests(run, args.scenario, args.instances)
    lines = preamble(f"{args.scenario}, {args.instances} instances ({len(prompts)} loglikelihood requests), "
                     f"{args.repeats} interleaved repeats.") + [
             "| model | tokens | raw eval tok/s | raw eval, logits_all tok/s | infer stage tok/s (no reuse) | "
             "ratio to raw | ratio to raw logits_all | infer with prefix reuse: tokens evaluated, wall s | "
             "naive tok/s with reuse |", "|---|---|---|---|---|---|---|---|---|"]
    for model in args.models:
        ours, raws, alls, ratios, ratios_all = [], [], [], [], []
        for _ in range(args.repeats):
            wall, tokens, seqs = infer_side(run, model, prompts, prefix_reuse=False)
            raw, raw_all = raw_side(run, model, seqs), raw_side(run, model, seqs, logits_all=True)
            assert sum(map(len, seqs)) == tokens, "token streams differ"
            ours.append(tokens / wall)
            raws.append(tokens / raw)
            alls.append(tokens / raw_all)
            ratios.append(raw / wall)
            ratios_all.append(raw_all / wall)
            print(f"{model}: {tokens} tokens, raw {tokens / raw:.0f} tok/s, raw logits_all {tokens / raw_all:.0f} "
                  f"tok/s, infer {tokens / wall:.0f} tok/s, ratio {raw / wall:.3f} / {raw_all / wall:.3f}")
        reuse = [infer_side(run, model, prompts)[:2] for _ in range(args.repeats)]
        rw, rt = median([w for w, _ in reuse]), reuse[0][1]
        lines.append(f"| {model} | {tokens:,} | {median(raws):.0f} | {median(alls):.0f} | {median(ours):.0f} | "
                     f"{median(ratios):.3f} | {median(ratios_all):.3f} | {rt:,}, {rw:.1f} | {tokens / rw:.0f} |")
        print(f"{model}: with prefix reuse {rt} tokens evaluated in {rw:.1f} s")
    write_section("infer_throughput", lines)


if __name__ == "__main__":
    main()
