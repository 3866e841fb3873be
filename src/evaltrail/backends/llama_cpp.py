"""Embedded llama.cpp backend: loglikelihoods and greedy generations of many requests at once.

Requests are evaluated together by PackedScorer: each is its own sequence in one KV cache, a
prompt prefix shared by several (a few-shot header, a question before its options) is decoded
once for all of them, generations advance one token per sequence per batch, and logits are
computed only at the positions a score reads (Gemma's 262k-token vocabulary makes the output
layer larger than the rest of the model). A request's numbers do not depend on what it was
evaluated with (PackedScorer says why); the log-softmax is the engine's own kernel.
"""

from __future__ import annotations

import ctypes
import os
import time
from pathlib import Path

import numpy as np

from .. import cores, engine
from ..config import ModelConfig
from ..errors import EvaltrailError
from .packing import Job, common_prefix, plan

_POOL = None


def _log_softmax_at(rows: np.ndarray, tokens, threads: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Logprob of tokens[i] under logits rows[i], whether it is a most likely token, and each
    row's argmax: the engine's own kernel (engine_ops.c, the same bits on every CPU), with the
    rows split over `threads` (each row is computed whole by one thread, so the split changes
    no bit)."""
    global _POOL
    rows = np.ascontiguousarray(rows, dtype=np.float32)
    n, vocab = rows.shape
    targets = np.ascontiguousarray(tokens, dtype=np.int32)
    lp, top = np.empty(n, np.float64), np.empty(n, np.int32)
    fn = engine.log_softmax_at()

    def part(lo: int, hi: int) -> None:
        fn(rows[lo:].ctypes.data, hi - lo, vocab, targets[lo:].ctypes.data, lp[lo:].ctypes.data, top[lo:].ctypes.data)

    cuts = np.linspace(0, n, min(threads, n) + 1).astype(int) if n else [0, 0]
    if len(cuts) > 2:
        if _POOL is None:
            from concurrent.futures import ThreadPoolExecutor

            _POOL = ThreadPoolExecutor(max_workers=os.cpu_count() or 1, thread_name_prefix="log-softmax")
        list(_POOL.map(part, cuts[:-1], cuts[1:]))
    elif n:
        part(0, n)
    picked = rows[np.arange(n), np.where(targets < 0, top, targets)]
    return lp, picked >= rows[np.arange(n), top], top


REVISION = 6
"""Bumped whenever this backend's outputs change meaning or fields, so old cache entries miss.
6: every request through PackedScorer (flash attention, packed batches, the engine's log-softmax)."""

PACK = 60
"""Tokens per packed batch, and prompts per generation wave. Below 64, ggml's CPU flash attention
computes each query row alone over the KV cells in order, skipping masked cells
(`GGML_FA_TILE_Q` is 64; from 64 rows on it tiles rows and cells together). 60 decodes faster
than 32 (bench/RESULTS.md, batch_shape); results are the same bits at any shape from 8 to 60
tokens in multiples of 4 (measured on both models)."""

MIN_SHAPE = 8
"""The smallest batch, and the fewest logits rows a batch reads: Gemma's logprobs differ in batches
of 4 or 6 tokens, and when a batch reads only 4 rows (llama.cpp computes the last layer on the
rows read), by up to 0.0013 nats (measured)."""

WINDOWED_REVISION = 2
"""The answers of a sliding-window model (Gemma 3) changed twice after REVISION 6 while every other
model's stayed the same bits (SmolLM2: `evaltrail verify` of its published answers), so only a
windowed model's identity names them: 1, a rebuild decodes the kept prefix again; 2, a batch reads
at least MIN_SHAPE logits rows."""

SLACK = 32
"""KV cells of finished requests tolerated before the cache is rebuilt from the needed prefix:
every cell costs each later query row a mask test in flash attention, and a rebuild only copies
the prefix (5-shot MMLU, SmolLM2, 120 requests: 183 evaluated tok/s at 32, 145 at 512)."""


SWA_SLACK = 2048
"""SLACK for a sliding-window model, whose rebuild decodes the kept prefix again."""


def cpu_kernels() -> str:
    """The instruction sets the loaded llama.cpp build computes with, as it prints them
    ("CPU : AVX2 = 1 | ..."): a measurement beside the results; the engine's identity pins them."""
    return " ".join(engine.load().llama_print_system_info().decode().split())


def identity(cfg: ModelConfig, sha256: str, window: int = 0) -> dict:
    """What determines this backend's outputs (the model half of the cache key); no model load.

    The engine (llama.cpp build: version, kernel profile, library sha256) is part of it: two
    builds round differently, so their answers never share a cache entry."""
    ident = {
        "backend": "llama_cpp",
        "revision": REVISION,
        "sha256": sha256,
        "engine": engine.identity(),
        "n_ctx": cfg.n_ctx,
        "pack": PACK,
    }
    # the template itself is inside the weights (pinned by sha256); only whether it is used varies
    if cfg.chat_template:
        ident["chat_template"] = True
    if not cfg.prefix_reuse:
        ident["prefix_reuse"] = False
    # A sliding-window model's answers changed with fixes that left the others' alone: its window
    # and WINDOWED_REVISION key the new answers, and none computed before them.
    if window:
        ident["sliding_window"] = window
        ident["windowed_revision"] = WINDOWED_REVISION
    return ident


class PackedScorer:
    """Continuation logprobs of many requests at once, packed into fixed-shape batches with every
    shared prefix decoded once (the plan: `packing.plan`).

    A request's logprobs are bit-identical whatever it is packed with, in whatever order and
    after whatever history (tests/test_packing.py, bench/seq_independence.py), because:
    - attention is ggml's flash attention with fewer than 64 rows per batch, whose CPU kernel
      computes each query row alone and skips masked cells, so other sequences' cells add nothing;
    - a sequence's cells lie in position order, so every row visits its own cells in the same
      order: cells are never freed one by one (a freed hole would be refilled out of order); a
      finished request's cells pass to a retired sequence that nobody attends to, and when those
      exceed SLACK the cache is rebuilt, restoring only the needed prefix in order (for a
      sliding-window model by decoding it again: see `_rebuild`);
    - batches have `size` tokens (generation steps: the active sequences, at least MIN_SHAPE),
      padded by a filler sequence to a multiple of 4, and logits rows (none, or a multiple of 4
      and at least MIN_SHAPE), so every matrix product takes the same kernel for every row (ggml
      multiplies a single column, or the rows left over from blocks of 4, with other kernels; the
      last layer runs on the logits rows alone, so their count shapes its products too).
    """

    def __init__(self, lib, model, n_vocab: int, n_ctx: int, threads: int, size: int = PACK, slack: int = SLACK):
        self.window = int(lib.llama_model_n_swa(model))  # 0: no sliding-window attention
        if self.window:  # a rebuild decodes the kept prefix again: rarer, so more slack
            slack = max(slack, SWA_SLACK)
        self.lib, self.n_vocab, self.size, self.slack, self.threads = lib, n_vocab, size, slack, threads
        self.n_seq = size + 4  # live jobs in a batch <= size + 1 (the kept one); filler; retired
        self.filler, self.retired = self.n_seq - 2, self.n_seq - 1
        p = lib.llama_context_default_params()
        p.n_ctx = self.kv = 4 * n_ctx + slack + 2 * size  # room for a wave of generations
        p.n_batch = p.n_ubatch = size
        p.n_seq_max = p.n_outputs_max = self.n_seq  # llama.cpp sizes its output buffer by both
        p.n_outputs_max_per_seq = 0
        p.n_threads = p.n_threads_batch = threads
        p.kv_unified, p.swa_full, p.no_perf = True, True, True
        p.flash_attn_type = lib.LLAMA_FLASH_ATTN_TYPE_ENABLED
        self.ctx = lib.llama_init_from_model(model, p)
        if not self.ctx:
            raise EvaltrailError("llama.cpp could not create the packed context (out of memory?)")
        self.mem = lib.llama_get_memory(self.ctx)
        self.batch = lib.llama_batch_init(size, 0, self.n_seq)
        self.top = 0  # cells in use: all of [0, top), since none is ever freed alone

    def close(self) -> None:
        self.lib.llama_batch_free(self.batch)
        self.lib.llama_free(self.ctx)

    def _rebuild(self, seq_id: int, n: int, tokens=()) -> None:
        """Empty the cache but for positions [0, n) of seq_id (its `tokens`), restored in order at
        cells [0, n)."""
        lib = self.lib
        if n and self.window:
            # llama.cpp saves a sliding-window sequence without the cells its window has left,
            # and answers after such a restore differed with the company (Gemma 3, prompts over
            # 512 tokens): decode the prefix again, in order, as the first time (same bits).
            lib.llama_memory_clear(self.mem, False)
            self.top = 0
            for lo in range(0, n, self.size):
                self._decode([(tokens[p], p, [seq_id], False) for p in range(lo, min(n, lo + self.size))], self.size)
            return
        lib.llama_memory_seq_rm(self.mem, seq_id, n, -1)
        data = None
        if n:
            size = lib.llama_state_seq_get_size(self.ctx, seq_id)
            data = (ctypes.c_uint8 * size)()
            lib.llama_state_seq_get_data(self.ctx, data, size, seq_id)
        lib.llama_memory_clear(self.mem, False)
        self.top = 0
        if n:
            if lib.llama_state_seq_set_data(self.ctx, data, len(data), seq_id) == 0:
                raise EvaltrailError("llama.cpp could not restore a shared prefix into the packed context")
            self.top = n

    def _decode(self, entries: list[tuple[int, int, list[int], bool]], shape: int) -> tuple[list[int], np.ndarray]:
        """Decode entries (token, position, llama seq ids, logits wanted) as one batch, padded to
        `shape` tokens by the filler sequence; return the batch indices whose logits llama.cpp
        returned and those rows (a view of its buffer: read it before the next decode)."""
        lib, bt = self.lib, self.batch
        for k, (tok, pos, sids, want) in enumerate(entries):
            bt.token[k], bt.pos[k], bt.n_seq_id[k], bt.logits[k] = tok, pos, len(sids), want
            for m, sid in enumerate(sids):
                bt.seq_id[k][m] = sid
        shape = -(-max(shape, len(entries), MIN_SHAPE) // 4) * 4
        for k in range(len(entries), shape):  # the filler: its own sequence, never read
            bt.token[k], bt.pos[k], bt.n_seq_id[k], bt.logits[k] = 0, k - len(entries), 1, False
            bt.seq_id[k][0] = self.filler
        # Matrix products take rows in blocks of 4 and a leftover row with another kernel
        # (ggml's repacked K-quants: gemm vs gemv), and Gemma's differ at 4 rows: so batches and
        # their logits rows come in 4s, and at least MIN_SHAPE of them.
        spare = (k for k in range(shape - 1, -1, -1) if not bt.logits[k])
        rows = sum(bool(bt.logits[k]) for k in range(shape))
        for _ in range(max(-(-rows // 4) * 4, MIN_SHAPE) - rows if rows else 0):
            bt.logits[next(spare)] = True
        out = [k for k in range(shape) if bt.logits[k]]
        bt.n_tokens = shape
        if lib.llama_decode(self.ctx, bt) != 0:
            raise EvaltrailError("llama_decode failed in the packed context (KV cache full?)")
        self.top += shape
        self._retire(self.filler)
        block = np.ctypeslib.as_array(lib.llama_get_logits(self.ctx), shape=(len(out), self.n_vocab)) if out else None
        return out, block

    def _retire(self, sid: int) -> None:
        """Free a sequence id without freeing a cell: its cells pass to the retired sequence."""
        self.lib.llama_memory_seq_cp(self.mem, sid, self.retired, -1, -1)
        self.lib.llama_memory_seq_rm(self.mem, sid, -1, -1)

    def run(self, jobs: list[Job], reuse: bool = True, keep: bool = False):
        """Yield (job index, logprobs of tokens[first_row+1 : decode+1], greedy flags, tokens
        evaluated for it, its share of the batches' seconds, its argmax at each row) as jobs
        finish; jobs sorted by tokens share the most. With `keep`, every job's sequence stays in
        the cache afterwards as `self.seq[job]` (for generation), and the cache is never rebuilt."""
        seq: dict[int, int] = {}
        self.seq = seq
        free = list(range(self.n_seq - 3, -1, -1))
        lps: dict[int, list] = {}
        greedy: dict[int, list] = {}
        tops: dict[int, list] = {}
        evaluated: dict[int, int] = {}
        seconds: dict[int, float] = {}
        self._rebuild(0, 0)
        for b in plan(jobs, self.size, reuse):
            t0 = time.perf_counter()
            for src, dst, n in b.copies:
                if dst not in seq:
                    seq[dst] = free.pop()
                self.lib.llama_memory_seq_cp(self.mem, seq[src], seq[dst], 0, n)
            for s in b.slots:
                for j in s.seqs:
                    if j not in seq:
                        seq[j] = free.pop()
                evaluated[s.job] = evaluated.get(s.job, 0) + 1
            out, block = self._decode(
                [(s.token, s.pos, [seq[j] for j in s.seqs], s.logits) for s in b.slots], self.size
            )
            if out:
                real = [k < len(b.slots) and b.slots[k].logits for k in out]
                targets = [
                    jobs[b.slots[k].job].tokens[b.slots[k].pos + 1]
                    if r and b.slots[k].pos + 1 < len(jobs[b.slots[k].job].tokens)
                    else -1
                    for k, r in zip(out, real)
                ]
                lp, g, top = _log_softmax_at(block, targets, self.threads)
                for k, r, x, y, t in zip(out, real, lp, g, top):
                    if r:
                        j = b.slots[k].job
                        lps.setdefault(j, []).append(float(x))
                        greedy.setdefault(j, []).append(bool(y))
                        tops.setdefault(j, []).append(int(t))
            share = (time.perf_counter() - t0) / len(b.slots)
            for s in b.slots:
                seconds[s.job] = seconds.get(s.job, 0.0) + share
            for j in b.finished:
                yield (
                    j,
                    np.asarray(lps.pop(j, [])),
                    np.asarray(greedy.pop(j, []), bool),
                    evaluated.pop(j, 0),
                    seconds.pop(j, 0.0),
                    tops.pop(j, []),
                )
            if keep:
                continue
            for j in b.release:
                self._retire(seq[j])
                free.append(seq.pop(j))
            keep_job, keep_n = b.keep
            if not keep_n:
                self._rebuild(0, 0)  # nothing needed: an empty cache is free
            elif self.top - keep_n > self.slack or self.top + self.size > self.kv:
                self._rebuild(seq[keep_job], keep_n, jobs[keep_job].tokens)


class LlamaCppBackend:
    def __init__(self, cfg: ModelConfig, weights: Path, sha256: str):
        self.cfg, self.sha256 = cfg, sha256
        self.cores = cores.Reservation(cfg.n_threads)  # never more threads than free cores
        threads = self.threads = self.cores.threads
        llama_cpp_lib = self.lib = engine.load()
        self.llm = llama_cpp_lib.Llama(
            model_path=str(weights),
            n_ctx=cfg.n_ctx,
            n_batch=cfg.n_batch,
            n_threads=threads,
            n_threads_batch=threads,
            logits_all=False,
            seed=0,
            verbose=False,
        )
        self.n_vocab = self.llm.n_vocab()
        self.eos = self.llm.token_eos()
        self.template = self._chat_template() if cfg.chat_template else None
        self._packer: PackedScorer | None = None

    def _chat_template(self):
        """The GGUF's own chat template, compiled in a sandbox with size and time limits (it is data
        from the weights file)."""
        from .chat_template import BoundedTemplate

        source = self.llm.metadata.get("tokenizer.chat_template")
        if not source:
            raise EvaltrailError(
                f"params.yaml: model.{self.cfg.name}.chat_template: the GGUF has no "
                f"tokenizer.chat_template; set it to false"
            )
        return BoundedTemplate(source, f"params.yaml: model.{self.cfg.name}.chat_template")

    def render(self, prompt: str) -> str | None:
        """The prompt as one user turn plus the assistant header; None without a chat template."""
        if self.template is None:
            return None
        special = lambda tok: self.llm.detokenize([tok], special=True).decode("utf-8", errors="replace")  # noqa: E731
        return self.template.render(
            messages=[{"role": "user", "content": prompt}],
            add_generation_prompt=True,
            bos_token=special(self.llm.token_bos()),
            eos_token=special(self.eos),
        )

    def _tokens(self, text: str, bos: bool = True, special: bool = False) -> list[int]:
        return self.llm.tokenize(text.encode("utf-8"), add_bos=bos, special=special)

    def _fit(self, tokens: list[int], room: int) -> tuple[list[int], int]:
        """Left-truncate so `room` more tokens fit in the context window; return (tokens, dropped).

        The left end is the instructions and the oldest in-context examples, so the instance's
        own text survives; infer reports every truncated request."""
        keep = self.cfg.n_ctx - room
        if keep < 1:
            raise EvaltrailError(
                f"params.yaml: model.{self.cfg.name}.n_ctx={self.cfg.n_ctx} cannot hold a request's "
                f"{room} scored/generated tokens plus any prompt; raise it"
            )
        return (tokens[-keep:], len(tokens) - keep) if len(tokens) > keep else (tokens, 0)

    def _packed(self) -> PackedScorer:
        if self._packer is None:
            self._packer = PackedScorer(self.lib, self.llm._model.model, self.n_vocab, self.cfg.n_ctx, self.threads)
        return self._packer

    def _ll_job(self, prompt: str, continuation: str) -> tuple[Job, dict]:
        """A loglikelihood request as a packing job, and the answer fields known before scoring."""
        rendered = self.render(prompt)
        special = rendered is not None  # template markup is made of special tokens
        prompt = prompt if rendered is None else rendered
        # A context's trailing spaces belong to the continuation, as lm-evaluation-harness does.
        stripped = prompt.rstrip(" ")
        continuation = prompt[len(stripped) :] + continuation
        ctx = self._tokens(stripped, special=special)
        whole = self._tokens(stripped + continuation, special=special)
        if whole[: len(ctx)] != ctx:  # tokenizer merged across the boundary: score separately
            whole = ctx + self._tokens(continuation, bos=False)
        n_cont = len(whole) - len(ctx)
        if n_cont >= self.cfg.n_ctx:  # the continuation must fit whole (after at least one context token)
            raise EvaltrailError(
                f"params.yaml: model.{self.cfg.name}.n_ctx={self.cfg.n_ctx} cannot hold a "
                f"{n_cont}-token continuation plus its context; raise it"
            )
        whole, dropped = self._fit(whole, 0)
        start = len(whole) - n_cont
        return (
            Job(tuple(whole), start - 1, len(whole) - 1),
            {
                "text": None,
                "num_prompt_tokens": start,
                "num_output_tokens": n_cont,
                "truncated_tokens": dropped,
                "rendered_prompt": rendered,
            },
        )

    @staticmethod
    def _ll_answer(fields: dict, lps, greedy, evaluated: int, seconds: float) -> dict:
        return {
            **fields,
            "logprob": float(lps.sum()),
            "is_greedy": bool(greedy.all()),
            "token_logprobs": [float(x) for x in lps],
            "num_evaluated_tokens": evaluated,
            "runtime_s": seconds,
        }

    def loglikelihood_many(self, items: list[tuple[str, str]]):
        """Yield (index into items, answer) for (prompt, continuation) pairs as they finish,
        evaluated together in packed batches (the answers do not depend on the company)."""
        yield from self._score_many(items, [])

    def _score_many(self, lls: list[tuple[str, str]], gens: list[tuple[str, int, list[str]]]):
        """Loglikelihoods and generations of at most one token in one plan; indices run over lls
        then gens. A one-token generation is the argmax of its prompt's last row."""
        jobs = [self._ll_job(p, c) for p, c in lls]
        for prompt, max_tokens, _ in gens:
            tokens, dropped, rendered = self._gen_prep(prompt, max_tokens or 0)
            jobs.append(
                (
                    Job(tuple(tokens), len(tokens) - 1, len(tokens)),
                    {"num_prompt_tokens": len(tokens), "truncated_tokens": dropped, "rendered_prompt": rendered},
                )
            )
        order = sorted(range(len(jobs)), key=lambda i: jobs[i][0].tokens)
        for k, lps, greedy, evaluated, seconds, tops in self._packed().run(
            [jobs[i][0] for i in order], self.cfg.prefix_reuse
        ):
            i = order[k]
            if i < len(lls):
                yield i, self._ll_answer(jobs[i][1], lps, greedy, evaluated, seconds)
                continue
            st = self._new_generation()
            self._step(st, int(tops[0]), float(lps[0]), *gens[i - len(lls)][1:])
            yield (
                i,
                {
                    **jobs[i][1],
                    "text": st["text"],
                    "logprob": float(sum(st["lps"])),
                    "is_greedy": True,
                    "token_logprobs": st["lps"],
                    "num_output_tokens": len(st["out"]),
                    "num_evaluated_tokens": evaluated,
                    "runtime_s": seconds,
                },
            )

    def loglikelihood(self, prompt: str, continuation: str) -> dict:
        return next(self.loglikelihood_many([(prompt, continuation)]))[1]

    def map_requests(self, items: list[tuple[str, dict]], call):
        """run_requests' hook: loglikelihoods and one-token generations packed together (a
        multiple-choice prompt asked both ways shares its tokens), longer generations decoded in
        parallel, rolling loglikelihoods one by one."""
        ll = [(key, c) for key, c in items if c["method"] == "loglikelihood"]
        one = [
            (key, c)
            for key, c in items
            if c["method"] == "generate" and (c["max_tokens"] or 0) <= 1 and "sampling" not in c
        ]
        for i, answer in self._score_many(
            [(c["prompt"], c["continuation"]) for _, c in ll],
            [(c["prompt"], c["max_tokens"], c["stop"]) for _, c in one],
        ):
            yield (ll[i] if i < len(ll) else one[i - len(ll)])[0], answer
        gen = [
            (key, c)
            for key, c in items
            if c["method"] == "generate" and ((c["max_tokens"] or 0) > 1 or "sampling" in c)
        ]
        for i, answer in self.generate_many(
            [(c["prompt"], c["max_tokens"], c["stop"], c.get("sampling")) for _, c in gen]
        ):
            yield gen[i][0], answer
        for key, c in items:
            if c["method"] not in ("loglikelihood", "generate"):
                yield key, call(self, c)

    def loglikelihood_rolling(self, text: str) -> dict:
        """Logprob of every token of `text`, each predicted once, in windows of the context.

        Disjoint windows (lm-evaluation-harness's rolling windows with context length 1): the
        first is conditioned on BOS, each later one on the token just before it."""
        t0 = time.perf_counter()
        tokens = self._tokens(text, bos=False)
        bos = self.llm.token_bos()
        prev = bos if bos >= 0 else self.eos
        width = self.cfg.n_ctx - 1
        jobs = []
        for start in range(0, len(tokens), width):
            window = [prev if start == 0 else tokens[start - 1]] + tokens[start : start + width]
            jobs.append(Job(tuple(window), 0, len(window) - 1))
        got = {k: (lps, n) for k, lps, _, n, *_ in self._packed().run(jobs, self.cfg.prefix_reuse)}
        lps = [float(x) for k in range(len(jobs)) for x in got[k][0]]
        return {
            "text": None,
            "logprob": float(sum(lps)),
            "is_greedy": None,
            "token_logprobs": lps,
            "num_prompt_tokens": 0,
            "num_output_tokens": len(tokens),
            "num_evaluated_tokens": sum(n for _, n in got.values()),
            "truncated_tokens": 0,
            "runtime_s": time.perf_counter() - t0,
        }

    def _gen_prep(self, prompt: str, max_tokens: int) -> tuple[list[int], int, str | None]:
        rendered = self.render(prompt)
        source = prompt if rendered is None else rendered
        tokens, dropped = self._fit(self._tokens(source, special=rendered is not None), max_tokens)
        return tokens, dropped, rendered

    @staticmethod
    def _new_generation() -> dict:
        return {"out": [], "lps": [], "text": "", "done": False}

    def _step(self, st: dict, tok: int, lp: float, max_tokens: int | None, stop: list[str]) -> None:
        """Take greedy token `tok` into generation `st`: EOS, the token budget or a stop string
        ends it (the text is cut at the stop string)."""
        if tok == self.eos or len(st["out"]) >= (max_tokens or 0):
            st["done"] = True
            return
        st["out"].append(tok)
        st["lps"].append(lp)
        text = self.llm.detokenize(st["out"]).decode("utf-8", errors="replace")
        hit = min((text.index(s) for s in stop if s and s in text), default=None)
        st["text"] = text if hit is None else text[:hit]
        st["done"] = hit is not None or len(st["out"]) >= max_tokens

    def generate_many(self, items: list[tuple]):
        """Yield (index into items, answer) for (prompt, max_tokens, stop[, sampling]) items:
        continuations decoded together, one sequence each, in waves of up to PACK prompts (shared
        prompt prefixes decoded once); an answer does not depend on its wave (tests/test_packing.py).
        Greedy items and sampled ones (sampling: {temperature, seed}) go in separate waves.

        A finished sequence keeps its cells until its wave ends (a freed cell refilled by another
        sequence would put that sequence's cells out of order)."""
        prep = [self._gen_prep(item[0], item[1]) for item in items]
        packer = self._packed()
        for sampled in (False, True):
            mine = [i for i in range(len(items)) if (_sampling(items[i]) is not None) == sampled]
            order = sorted(mine, key=lambda i: prep[i][0])
            while order:
                wave, cells = [], 0
                while order and len(wave) < packer.size:
                    # cells a prompt adds: what it does not share with its predecessor, and its output
                    own = prep[order[0]][0]
                    shared = common_prefix(prep[wave[-1]][0], own) if wave else 0
                    need = len(own) - shared + items[order[0]][1]
                    if wave and cells + need > packer.kv - 2 * packer.size:
                        break
                    wave.append(order.pop(0))
                    cells += need
                yield from self._wave(packer, wave, items, prep, sampled)

    def _wave(self, packer: PackedScorer, wave: list[int], items, prep, sampled: bool = False):
        t0 = time.perf_counter()
        if sampled:  # the last prompt token is decoded in the loop below, where its whole row is at hand
            if any(len(prep[i][0]) < 2 for i in wave):
                raise EvaltrailError("a sampled generation needs a prompt of at least two tokens")
            jobs = [Job(tuple(prep[i][0]), len(prep[i][0]) - 2, len(prep[i][0]) - 1) for i in wave]
        else:
            jobs = [Job(tuple(prep[i][0]), len(prep[i][0]) - 1, len(prep[i][0])) for i in wave]
        state: dict[int, dict] = {}

        def step(k: int, tok: int, lp: float) -> None:
            self._step(state[k], tok, lp, *items[wave[k]][1:3])

        for k, lps, _, evaluated, _, tops in packer.run(jobs, self.cfg.prefix_reuse, keep=True):
            state[k] = {**self._new_generation(), "evaluated": evaluated}
            if sampled:
                draw = _sampling(items[wave[k]])
                state[k]["draw"] = (float(draw["temperature"]), np.random.default_rng(int(draw["seed"])))
            else:
                step(k, int(tops[0]), float(lps[0]))
        while active := [k for k in range(len(jobs)) if not state[k]["done"]]:
            entries = [
                (
                    state[k]["out"][-1] if state[k]["out"] else jobs[k].tokens[-1],
                    len(jobs[k].tokens) + len(state[k]["out"]) - 1,
                    [packer.seq[k]],
                    True,
                )
                for k in active
            ]
            out, block = packer._decode(entries, 0)  # as few filler tokens as the shape rules allow
            picks = [draw_token(block[j], *state[k]["draw"]) for j, k in enumerate(active)] if sampled else []
            lp, _, top = _log_softmax_at(block, picks + [-1] * (len(out) - len(picks)), self.threads)
            for j, k in enumerate(active):  # active tokens come first, in order
                state[k]["evaluated"] += 1
                step(k, picks[j] if sampled else int(top[j]), float(lp[j]))
        seconds = (time.perf_counter() - t0) / len(wave)
        for k, i in enumerate(wave):
            st, (tokens, dropped, rendered) = state[k], prep[i]
            yield (
                i,
                {
                    "text": st["text"],
                    "logprob": float(sum(st["lps"])),
                    "is_greedy": not sampled,
                    "token_logprobs": st["lps"],
                    "num_prompt_tokens": len(tokens),
                    "num_output_tokens": len(st["out"]),
                    "num_evaluated_tokens": st["evaluated"],
                    "truncated_tokens": dropped,
                    "rendered_prompt": rendered,
                    "runtime_s": seconds,
                },
            )

    def generate(self, prompt: str, max_tokens: int, stop: list[str], sampling: dict | None = None) -> dict:
        return next(self.generate_many([(prompt, max_tokens, stop, sampling)]))[1]


def _sampling(item: tuple) -> dict | None:
    return item[3] if len(item) > 3 else None


def draw_token(row: np.ndarray, temperature: float, rng: np.random.Generator) -> int:
    """A token drawn from softmax(row / temperature) by the Gumbel-max trick: the argmax of
    row / temperature plus one Gumbel draw per token. It needs no exp or sum over the vocabulary,
    whose last bits numpy's SIMD paths could make differ between CPUs: the row is the pinned
    engine's, the division is exact IEEE arithmetic, and the draws are PCG64's integer stream
    turned into doubles by numpy's scalar C code (one log pair each), so a seed gives the same
    token on any x86-64 machine running the pinned engine."""
    return int(np.argmax(row.astype(np.float64) / temperature + rng.gumbel(size=row.shape[0])))
