"""Does a sequence's logits depend on what else is in its llama.cpp batch? (research for packing)

Packing many requests into one `llama_decode` as separate sequences keeps a request's logprobs
independent of its neighbours only if ggml computes its rows the same whatever surrounds them.
This decodes a fixed sequence A with the pinned engine in layouts that differ only around A and
compares A's logits bit for bit with A decoded alone at the start of the batch:

- neighbours after A (other sequences, other tokens);
- a neighbour of n tokens before A, which moves A's batch rows and KV cells by n;
- the batch padded to more tokens (the shape of the batch);
- 1 thread instead of 2;

each with flash attention off and on. A cell shows `=` (bit-identical) or the largest absolute
logit difference.

    python bench/seq_independence.py [--model smollm2_135m_instruct gemma3_270m]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, preamble, require_idle, write_section  # noqa: E402

TEXT = b"The capital of France is Paris. The capital of Italy is Rome. The capital of Spain is"
OFFSETS = (1, 4, 8, 16, 37, 64)
N_SEQ = 4


class Probe:
    def __init__(self, weights: Path, threads: int):
        from evaltrail import engine

        self.L = engine.load()
        self.llm = self.L.Llama(model_path=str(weights), n_ctx=512, n_batch=512, verbose=False)
        self.nv, self.threads = self.llm.n_vocab(), threads
        self.a = [int(t) for t in self.llm.tokenize(TEXT, add_bos=True)]

    def filler(self, seed: int, n: int) -> list[int]:
        return [int(t) for t in np.random.default_rng(seed).integers(100, 5000, n)]

    def logits(self, layout: list[tuple[int, list[int]]], shape: int | None, flash: bool, threads: int | None = None):
        """Decode `layout` ((seq_id, tokens) in batch order) in one batch, padded to `shape` tokens
        with a filler sequence; return sequence 0's logits at each of its positions."""
        L = self.L
        p = L.llama_context_default_params()
        p.n_ctx, p.n_batch, p.n_ubatch, p.n_seq_max, p.kv_unified = 2048, 512, 512, N_SEQ, True
        p.flash_attn_type = L.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash else L.LLAMA_FLASH_ATTN_TYPE_DISABLED
        p.n_threads = p.n_threads_batch = threads or self.threads
        ctx = L.llama_init_from_model(self.llm._model.model, p)
        items = [(sid, i, t) for sid, toks in layout for i, t in enumerate(toks)]
        if shape:
            items += [(N_SEQ - 1, i, t) for i, t in enumerate(self.filler(99, shape - len(items)))]
        batch = L.llama_batch_init(len(items), 0, N_SEQ)
        batch.n_tokens = len(items)
        for k, (sid, pos, tok) in enumerate(items):
            batch.token[k], batch.pos[k], batch.n_seq_id[k] = tok, pos, 1
            batch.seq_id[k][0], batch.logits[k] = sid, sid == 0
        try:
            if L.llama_decode(ctx, batch) != 0:
                raise SystemExit(f"llama_decode failed for layout {[(s, len(t)) for s, t in layout]}")
            rows = [k for k, it in enumerate(items) if it[0] == 0]
            return np.stack(
                [np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, k), shape=(self.nv,)).copy() for k in rows]
            )
        finally:
            L.llama_batch_free(batch)
            L.llama_free(ctx)


def _cmp(got: np.ndarray, ref: np.ndarray) -> str:
    return "=" if np.array_equal(got.view(np.uint32), ref.view(np.uint32)) else f"{np.abs(got - ref).max():.2g}"


def probe(model: str) -> list[str]:
    from evaltrail.paths import model_path

    pr = Probe(ROOT / model_path(model), threads=2)
    lines = []
    for flash in (False, True):
        ref = pr.logits([(0, pr.a)], 256, flash)
        cells = {
            "repeat": _cmp(pr.logits([(0, pr.a)], 256, flash), ref),
            "neighbour after": _cmp(pr.logits([(0, pr.a), (1, pr.filler(1, 60))], 256, flash), ref),
            "other neighbours after": _cmp(
                pr.logits([(0, pr.a), (1, pr.filler(2, 90)), (2, pr.filler(3, 7))], 256, flash), ref
            ),
        }
        for off in OFFSETS:
            cells[f"{off} before"] = _cmp(pr.logits([(1, pr.filler(10 + off, off)), (0, pr.a)], 256, flash), ref)
        cells["unpadded"] = _cmp(pr.logits([(0, pr.a)], None, flash), ref)
        cells["padded to 512"] = _cmp(pr.logits([(0, pr.a)], 512, flash), ref)
        cells["1 thread"] = _cmp(pr.logits([(0, pr.a)], 256, flash, threads=1), ref)
        if not lines:
            lines += ["| model | flash attention | " + " | ".join(cells) + " |", "|---|---|" + "---|" * len(cells)]
        lines.append(f"| {model} | {'on' if flash else 'off'} | " + " | ".join(cells.values()) + " |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", nargs="+", default=["smollm2_135m_instruct", "gemma3_270m"])
    args = ap.parse_args()
    require_idle()
    lines = preamble(
        f"sequence A ({len(TEXT)} bytes of text) decoded in a 256-token batch with a "
        f"{N_SEQ}-sequence unified KV cache, against other layouts"
    )
    rows = []
    for m in args.model:
        rows += probe(m)[(2 if rows else 0) :]
    print("\n".join(rows))
    write_section("seq_independence", lines + rows)


if __name__ == "__main__":
    main()
