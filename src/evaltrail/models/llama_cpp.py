"""Embedded llama.cpp backend: greedy generation and continuation loglikelihoods from one KV cache.

Consecutive requests reuse the longest common token prefix already in the KV cache (requests are
sorted by prompt, so few-shot headers and shared contexts are evaluated once).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import llama_cpp as llama_cpp_lib
import numpy as np

from ..config import ModelConfig
from ..errors import EvaltrailError


def _log_softmax_at(rows: np.ndarray, tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Logprob of tokens[i] under rows[i], and whether it is the argmax."""
    rows = rows.astype(np.float64)
    peak = rows.max(axis=1)
    lse = peak + np.log(np.exp(rows - peak[:, None]).sum(axis=1))
    picked = rows[np.arange(len(tokens)), tokens]
    return picked - lse, picked >= peak


REVISION = 2
"""Bumped whenever this backend's outputs change meaning or fields, so old cache entries miss."""


def identity(cfg: ModelConfig, sha256: str) -> dict:
    """What determines this backend's outputs (the model half of the cache key); no model load."""
    from llama_cpp import __version__

    ident = {"backend": "llama_cpp", "revision": REVISION, "sha256": sha256, "llama_cpp": __version__,
             "n_ctx": cfg.n_ctx, "n_batch": cfg.n_batch}
    # the template itself is inside the weights (pinned by sha256); only whether it is used varies
    if cfg.chat_template:
        ident["chat_template"] = True
    if not cfg.prefix_reuse:
        ident["prefix_reuse"] = False
    return ident


class LlamaCppBackend:
    def __init__(self, cfg: ModelConfig, weights: Path, sha256: str):
        import llama_cpp

        self.cfg, self.sha256 = cfg, sha256
        threads = cfg.n_threads or os.cpu_count() or 1
        self.llm = llama_cpp.Llama(model_path=str(weights), n_ctx=cfg.n_ctx, n_batch=cfg.n_batch,
                                   n_threads=threads, n_threads_batch=threads, logits_all=True,
                                   seed=0, verbose=False)
        self.eos = self.llm.token_eos()
        window = {k: v for k, v in self.llm.metadata.items() if k.endswith(".attention.sliding_window")}
        if window and cfg.prefix_reuse:
            # Measured on Gemma 3 (sliding window 512): after a partial KV removal, 35 of 120
            # HellaSwag logprobs differed from a fresh evaluation by up to 0.2 nats.
            raise EvaltrailError(f"params.yaml: model.{cfg.name}.prefix_reuse: the GGUF uses sliding-window "
                                 f"attention ({', '.join(f'{k}={v}' for k, v in window.items())}), where llama.cpp's "
                                 f"KV-prefix reuse gives wrong logits; set it to false")
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

    def _eval(self, tokens: list[int]) -> int:
        """Make the KV cache hold exactly `tokens` (logits for every position); return tokens evaluated."""
        llm = self.llm
        if not self.cfg.prefix_reuse and not self._extends(tokens):
            llm.reset()
            llama_cpp_lib.llama_memory_clear(llama_cpp_lib.llama_get_memory(llm._ctx.ctx), True)
        limit = min(llm.n_tokens, len(tokens))
        differ = np.nonzero(llm.input_ids[:limit] != np.asarray(tokens[:limit]))[0]
        n = int(differ[0]) if differ.size else limit
        llm.n_tokens = n  # eval() drops the KV entries past n before decoding the rest
        if n < len(tokens):
            llm.eval(tokens[n:])
        return len(tokens) - n

    def _extends(self, tokens: list[int]) -> bool:
        """Whether `tokens` continues exactly what the KV cache holds (no removal needed: the
        one reuse that stays correct without prefix_reuse, e.g. a generation step)."""
        n = self.llm.n_tokens
        return 0 < n <= len(tokens) and bool(np.array_equal(self.llm.input_ids[:n], np.asarray(tokens[:n])))

    def _fit(self, tokens: list[int], room: int) -> tuple[list[int], int]:
        """Left-truncate so `room` more tokens fit in the context window; return (tokens, dropped).

        The left end is the instructions and the oldest in-context examples, so the instance's
        own text survives; infer reports every truncated request."""
        keep = self.cfg.n_ctx - room
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
        whole, dropped = self._fit(whole, 0)
        evaluated = self._eval(whole)
        start = len(whole) - n_cont
        rows = self.llm.scores[start - 1: len(whole) - 1]
        lps, greedy = _log_softmax_at(rows, np.asarray(whole[start:]))
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
            evaluated += self._eval(window)
            got, _ = _log_softmax_at(self.llm.scores[: len(target)], np.asarray(target))
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
        evaluated = self._eval(tokens)
        out: list[int] = []
        lps: list[float] = []
        text = ""
        for _ in range(max_tokens):
            row = self.llm.scores[len(tokens) - 1][None, :]
            tok = int(np.argmax(row[0]))
            lp, _ = _log_softmax_at(row, np.asarray([tok]))
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
                evaluated += self._eval(tokens)
        return {"text": text, "logprob": float(sum(lps)), "is_greedy": True, "token_logprobs": lps,
                "num_prompt_tokens": n_prompt, "num_output_tokens": len(out),
                "num_evaluated_tokens": evaluated, "truncated_tokens": dropped,
                "rendered_prompt": rendered, "runtime_s": time.perf_counter() - t0}
