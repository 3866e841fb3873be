"""Raw llama.cpp decode speed of the pinned engine at several batch shapes, threads and attention kernels.

The reference for the infer stage's throughput is the best this engine does here, not its
default: a 4-sequence stream of real text (the same tokens for every setting) is decoded in
batches of `n_ubatch` tokens, with flash attention on and off, logits at one row per batch (what
raw `eval` asks) and at half the rows (about what scoring reads). Reported: tokens per second,
median of --repeats runs.

    python bench/batch_shape.py [--models smollm2_135m_instruct gemma3_270m] [--tokens 1024]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, median, preamble, require_idle, write_section  # noqa: E402

SHAPES = (16, 32, 48, 60, 64, 128, 512)
TEXT = (ROOT / "README.md").read_text()


def decode_rate(L, model, tokens: list[int], ubatch: int, flash: bool, threads: int, rows: str) -> float:
    """Tokens per second decoding `tokens` as 4 sequences, `ubatch` tokens per llama_decode."""
    p = L.llama_context_default_params()
    p.n_ctx, p.n_batch, p.n_ubatch, p.n_seq_max = 2 * len(tokens), ubatch, ubatch, 4
    p.n_outputs_max, p.kv_unified, p.no_perf = max(ubatch, 4), True, True
    p.n_threads = p.n_threads_batch = threads
    p.flash_attn_type = L.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash else L.LLAMA_FLASH_ATTN_TYPE_DISABLED
    ctx = L.llama_init_from_model(model, p)
    batch = L.llama_batch_init(ubatch, 0, 4)
    per = len(tokens) // 4
    stream = [(s, i, tokens[s * per + i]) for s in range(4) for i in range(per)]
    try:
        t0 = time.perf_counter()
        for lo in range(0, len(stream), ubatch):
            chunk = stream[lo : lo + ubatch]
            for k, (s, i, t) in enumerate(chunk):
                batch.token[k], batch.pos[k], batch.n_seq_id[k] = t, i, 1
                batch.seq_id[k][0] = s
                batch.logits[k] = (k == len(chunk) - 1) if rows == "last" else (k % 2 == 1)
            batch.n_tokens = len(chunk)
            if L.llama_decode(ctx, batch) != 0:
                raise SystemExit(f"llama_decode failed at ubatch {ubatch}")
        return len(stream) / (time.perf_counter() - t0)
    finally:
        L.llama_batch_free(batch)
        L.llama_free(ctx)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["smollm2_135m_instruct", "gemma3_270m"])
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    ap.add_argument("--rows", nargs="+", default=["last", "half"], choices=["last", "half"])
    ap.add_argument("--max-load", type=float, default=0.5, help="refuse to start above this load average")
    args = ap.parse_args()
    require_idle(args.max_load)
    from evaltrail import engine
    from evaltrail.paths import model_path

    L = engine.load()
    L.llama_backend_init()
    from llama_cpp import _logger

    _logger.set_verbose(False)
    lines = preamble(f"{args.tokens} tokens of README.md as 4 sequences; tokens/s, median of {args.repeats}") + [
        "| model | threads | rows with logits | flash attention | "
        + " | ".join(f"n_ubatch {s}" for s in SHAPES)
        + " |",
        "|---|---|---|---|" + "---|" * len(SHAPES),
    ]
    for name in args.models:
        mp = L.llama_model_default_params()
        model = L.llama_model_load_from_file(str(ROOT / model_path(name)).encode(), mp)
        vocab = L.llama_model_get_vocab(model)
        raw = TEXT.encode()
        buf = (L.llama_token * len(raw))()
        n = L.llama_tokenize(vocab, raw, len(raw), buf, len(buf), True, False)
        tokens = list(buf[: min(n, args.tokens)])
        for threads in args.threads:
            for rows in args.rows:
                for flash in (True, False):
                    rates = [
                        median([decode_rate(L, model, tokens, s, flash, threads, rows) for _ in range(args.repeats)])
                        for s in SHAPES
                    ]
                    line = (
                        f"| {name} | {threads} | {'1 per batch' if rows == 'last' else 'every 2nd'} | "
                        f"{'on' if flash else 'off'} | " + " | ".join(f"{r:.0f}" for r in rates) + " |"
                    )
                    print(line, flush=True)
                    lines.append(line)
        L.llama_model_free(model)
    write_section("batch_shape", lines)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
