"""Embedded llama.cpp backend: greedy generation and continuation loglikelihoods from one KV cache.

Consecutive requests reuse the longest common token prefix already in the KV cache (requests are
sorted by prompt, so few-shot headers and shared contexts are evaluated once), and logits are
computed only at the positions a score reads: the last prompt token for generation, the
continuation for loglikelihoods. (Gemma's 262k-token vocabulary makes the output layer larger
than the rest of the model, so logits everywhere would multiply its cost.)
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from .. import engine
from ..config import ModelConfig
from ..errors import EvaltrailError


def _log_softmax_at(rows: np.ndarray, tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Logprob of tokens[i] under rows[i], and whether it is the argmax."""
    rows = rows.astype(np.float64)
    peak = rows.max(axis=1)
    lse = peak + np.log(np.exp(rows - peak[:, None]).sum(axis=1))
    picked = rows[np.arange(len(tokens)), tokens]
    return picked - lse, picked >= peak


REVISION = 5
"""Bumped whenever this backend's outputs change meaning or fields, so old cache entries miss."""

GRID = 16
"""Reusable KV prefixes are whole chunks of this many tokens (at most n_batch), one batch each."""


def cpu_kernels() -> str:
    """The instruction sets the loaded llama.cpp build computes with, as it prints them
    ("CPU : AVX2 = 1 | ..."): a measurement beside the results; the engine's identity pins them."""
    return " ".join(engine.load().llama_print_system_info().decode().split())


def identity(cfg: ModelConfig, sha256: str) -> dict:
    """What determines this backend's outputs (the model half of the cache key); no model load.

    The engine (llama.cpp build: version, kernel profile, library sha256) is part of it: two
    builds round differently, so their answers never share a cache entry."""
    ident = {"backend": "llama_cpp", "revision": REVISION, "sha256": sha256, "engine": engine.identity(),
             "n_ctx": cfg.n_ctx, "n_batch": cfg.n_batch}
    # the template itself is inside the weights (pinned by sha256); only whether it is used varies
    if cfg.chat_template:
        ident["chat_template"] = True
    if not cfg.prefix_reuse:
        ident["prefix_reuse"] = False
    return ident


class LlamaCppBackend:
    def __init__(self, cfg: ModelConfig, weights: Path, sha256: str):
        self.cfg, self.sha256 = cfg, sha256
        threads = cfg.n_threads or os.cpu_count() or 1
        llama_cpp_lib = self.lib = engine.load()
        self.llm = llama_cpp_lib.Llama(model_path=str(weights), n_ctx=cfg.n_ctx, n_batch=cfg.n_batch,
                                       n_threads=threads, n_threads_batch=threads, logits_all=False,
                                       seed=0, verbose=False)
        self.n_vocab = self.llm.n_vocab()
        self.grid = min(GRID, cfg.n_batch)
        self._grid_valid = 0  # KV positions [0, this) were decoded in whole grid chunks
        self.eos = self.llm.token_eos()
        self.template = self._chat_template() if cfg.chat_template else None

    def _chat_template(self):
        """The GGUF's own chat template, compiled in a sandbox (it is data from the weights file)."""
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        source = self.llm.metadata.get("tokenizer.chat_template")
        if not source:
            raise EvaltrailError(f"params.yaml: model.{self.cfg.name}.chat_template: the GGUF has no "
                                 f"tokenizer.chat_template; set it to false")
        return ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).from_string(source)

    def render(self, prompt: str) -> str | None:
        """The prompt as one user turn plus the assistant header; None without a chat template."""
        if self.template is None:
            return None
        special = lambda tok: self.llm.detokenize([tok], special=True).decode("utf-8", errors="replace")  # noqa: E731
        return self.template.render(messages=[{"role": "user", "content": prompt}], add_generation_prompt=True,
                                    bos_token=special(self.llm.token_bos()), eos_token=special(self.eos))

    def _tokens(self, text: str, bos: bool = True, special: bool = False) -> list[int]:
        return self.llm.tokenize(text.encode("utf-8"), add_bos=bos, special=special)

    def _forward(self, tokens: list[int], first_row: int, continuing: bool = False):
        """Make the KV cache hold `tokens`; return (tokens evaluated, blocks of logits rows for
        positions first_row..len-1 in order). Each block is a view of llama.cpp's buffer: use it
        before asking for the next.

        llama.cpp's numerics depend on how tokens are batched (a 1-token batch takes another
        kernel than a long one). So that a request's logprobs never depend on which requests ran
        before it, tokens are always decoded in chunks on a fixed grid of `grid` positions, and
        only whole grid chunks are reused. `continuing`
        (a generation step: the KV holds exactly tokens[:-1]) decodes just the new token."""
        llm = self.llm
        if continuing:
            n = llm.n_tokens
        elif self.cfg.prefix_reuse:
            limit = min(self._grid_valid, len(tokens))
            differ = np.nonzero(llm.input_ids[:limit] != np.asarray(tokens[:limit]))[0]
            n = (min(int(differ[0]) if differ.size else limit, first_row) // self.grid) * self.grid
        else:
            n = 0
        if n == 0:
            self.lib.llama_memory_clear(self.lib.llama_get_memory(llm._ctx.ctx), True)
        else:
            llm._ctx.kv_cache_seq_rm(-1, n, -1)
        llm.n_tokens = n
        self._grid_valid = min(self._grid_valid, n) if n else 0
        return len(tokens) - n, self._decode(tokens, n, first_row)

    def _decode(self, tokens: list[int], start: int, first_row: int):
        """Decode tokens[start:] in grid chunks (the last one partial), asking for logits only at
        positions >= first_row; a chunk's hidden states do not depend on which rows give logits."""
        llm, batch = self.llm, self.llm._batch
        for lo in range(start, len(tokens), self.grid):
            hi = min(len(tokens), lo + self.grid)
            chunk = tokens[lo:hi]
            batch.set_batch(batch=chunk, n_past=lo, logits_all=False)
            for i in range(len(chunk)):
                batch.batch.logits[i] = lo + i >= first_row
            llm._ctx.decode(batch)
            llm.input_ids[lo:hi] = chunk
            llm.n_tokens = hi
            if hi - lo == self.grid and lo == self._grid_valid:
                self._grid_valid = hi  # a whole grid chunk on top of grid-decoded ones: reusable
            rows = hi - max(lo, first_row)
            if rows > 0:
                yield np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(rows, self.n_vocab))

    def _score(self, tokens: list[int], first_row: int) -> tuple[np.ndarray, np.ndarray, int]:
        """Logprobs (and greedy flags) of tokens[first_row+1:], each given everything before it."""
        evaluated, blocks = self._forward(tokens, first_row)
        targets = np.asarray(tokens[first_row + 1:])
        lps, greedy, done = [], [], 0
        for rows in blocks:
            rows = rows[: len(targets) - done]  # the last position predicts nothing
            if len(rows):
                lp, g = _log_softmax_at(rows, targets[done:done + len(rows)])
                lps.append(lp)
                greedy.append(g)
                done += len(rows)
        return np.concatenate(lps) if lps else np.zeros(0), np.concatenate(greedy) if greedy else np.zeros(0, bool), evaluated

    def _next_row(self, tokens: list[int], continuing: bool = False) -> tuple[np.ndarray, int]:
        """Logits predicting the token after `tokens` (a copy), and tokens evaluated."""
        evaluated, blocks = self._forward(tokens, len(tokens) - 1, continuing)
        row = None
        for rows in blocks:
            row = rows[-1].copy()
        return row, evaluated

    def _fit(self, tokens: list[int], room: int) -> tuple[list[int], int]:
        """Left-truncate so `room` more tokens fit in the context window; return (tokens, dropped).

        The left end is the instructions and the oldest in-context examples, so the instance's
        own text survives; infer reports every truncated request."""
        keep = self.cfg.n_ctx - room
        if keep < 1:
            raise EvaltrailError(f"params.yaml: model.{self.cfg.name}.n_ctx={self.cfg.n_ctx} cannot hold a request's "
                                 f"{room} scored/generated tokens plus any prompt; raise it")
        return (tokens[-keep:], len(tokens) - keep) if len(tokens) > keep else (tokens, 0)

    def loglikelihood(self, prompt: str, continuation: str) -> dict:
        t0 = time.perf_counter()
        rendered = self.render(prompt)
        special = rendered is not None  # template markup is made of special tokens
        prompt = prompt if rendered is None else rendered
        # A context's trailing spaces belong to the continuation, as lm-evaluation-harness does.
        stripped = prompt.rstrip(" ")
        continuation = prompt[len(stripped):] + continuation
        ctx = self._tokens(stripped, special=special)
        whole = self._tokens(stripped + continuation, special=special)
        if whole[: len(ctx)] != ctx:  # tokenizer merged across the boundary: score separately
            whole = ctx + self._tokens(continuation, bos=False)
        n_cont = len(whole) - len(ctx)
        if n_cont >= self.cfg.n_ctx:  # the continuation must fit whole (after at least one context token)
            raise EvaltrailError(f"params.yaml: model.{self.cfg.name}.n_ctx={self.cfg.n_ctx} cannot hold a "
                                 f"{n_cont}-token continuation plus its context; raise it")
        whole, dropped = self._fit(whole, 0)
        start = len(whole) - n_cont
        lps, greedy, evaluated = self._score(whole, start - 1)
        return {"text": None, "logprob": float(lps.sum()), "is_greedy": bool(greedy.all()),
                "token_logprobs": [float(x) for x in lps], "num_prompt_tokens": start,
                "num_output_tokens": n_cont, "num_evaluated_tokens": evaluated,
                "truncated_tokens": dropped, "rendered_prompt": rendered, "runtime_s": time.perf_counter() - t0}

    def loglikelihood_rolling(self, text: str) -> dict:
        """Logprob of every token of `text`, each predicted once, in windows of the context.

        Disjoint windows (lm-evaluation-harness's rolling windows with context length 1): the
        first is conditioned on BOS, each later one on the token just before it."""
        t0 = time.perf_counter()
        tokens = self._tokens(text, bos=False)
        bos = self.llm.token_bos()
        prev = bos if bos >= 0 else self.eos
        width = self.cfg.n_ctx - 1
        lps: list[float] = []
        evaluated = 0
        for start in range(0, len(tokens), width):
            target = tokens[start:start + width]
            window = [prev if start == 0 else tokens[start - 1]] + target
            got, _, n = self._score(window, 0)
            evaluated += n
            lps += [float(x) for x in got]
        return {"text": None, "logprob": float(sum(lps)), "is_greedy": None, "token_logprobs": lps,
                "num_prompt_tokens": 0, "num_output_tokens": len(tokens), "num_evaluated_tokens": evaluated,
                "truncated_tokens": 0, "runtime_s": time.perf_counter() - t0}

    def generate(self, prompt: str, max_tokens: int, stop: list[str]) -> dict:
        t0 = time.perf_counter()
        rendered = self.render(prompt)
        source = prompt if rendered is None else rendered
        tokens, dropped = self._fit(self._tokens(source, special=rendered is not None), max_tokens)
        n_prompt = len(tokens)
        row, evaluated = self._next_row(tokens)
        out: list[int] = []
        lps: list[float] = []
        text = ""
        for _ in range(max_tokens):
            tok = int(np.argmax(row))
            lp, _ = _log_softmax_at(row[None, :], np.asarray([tok]))
            if tok == self.eos:
                break
            out.append(tok)
            lps.append(float(lp[0]))
            text = self.llm.detokenize(out).decode("utf-8", errors="replace")
            hit = min((text.index(s) for s in stop if s and s in text), default=None)
            if hit is not None:
                text = text[:hit]
                break
            if len(out) < max_tokens:
                tokens = tokens + [tok]
                row, n = self._next_row(tokens, continuing=True)
                evaluated += n
        return {"text": text, "logprob": float(sum(lps)), "is_greedy": True, "token_logprobs": lps,
                "num_prompt_tokens": n_prompt, "num_output_tokens": len(out),
                "num_evaluated_tokens": evaluated, "truncated_tokens": dropped,
                "rendered_prompt": rendered, "runtime_s": time.perf_counter() - t0}
