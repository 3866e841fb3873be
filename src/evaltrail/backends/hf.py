"""Hugging Face transformers causal LMs from a local directory (optional extra: `pip install -e '.[hf]'`).

The model's identity is the sha256 of every file in its directory (fetch_model records each in
models/<model>/model.json; infer refuses a directory that changed since). Nothing is fetched from
a hub: loading runs with local_files_only. Scoring follows the llama_cpp backend: a context's
trailing spaces belong to the continuation, prompts too long for the window lose their left end.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import transformers

from ..config import SHA256_OF, HFConfig, ModelConfig, build
from ..errors import EvaltrailError
from ..hashing import sha256_file, stable_id

REVISION = 1
"""Bumped whenever this backend's outputs change meaning or fields, so old cache entries miss."""


def _hf(cfg: ModelConfig) -> HFConfig:
    return build(HFConfig, cfg.hf, f"params.yaml: model.{cfg.name}.hf")


def files_of(directory: Path) -> dict[str, str]:
    return {p.relative_to(directory).as_posix(): sha256_file(p) for p in sorted(directory.rglob("*")) if p.is_file()}


def describe(cfg: ModelConfig) -> dict:
    """models/<model>/model.json for a local transformers directory: every file's sha256."""
    hf = _hf(cfg)
    directory = Path(hf.path).expanduser()
    if not (directory / "config.json").is_file():
        raise EvaltrailError(
            f"params.yaml: model.{cfg.name}.hf.path: {directory} holds no config.json; point it at a "
            f"save_pretrained() directory"
        )
    files = files_of(directory)
    return {
        "name": cfg.name,
        "backend": "hf",
        "path": str(directory),
        "files": files,
        "sha256": stable_id(files, length=64),
        "sha256_of": SHA256_OF["hf"],
    }


def identity(cfg: ModelConfig, info: dict) -> dict:
    hf = _hf(cfg)
    return {
        "backend": "hf",
        "revision": REVISION,
        "sha256": info["sha256"],
        "dtype": hf.dtype,
        "max_length": hf.max_length,
        "transformers": transformers.__version__,
    }


class HFBackend:
    def __init__(self, cfg: ModelConfig, info: dict):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.cfg, hf = cfg, _hf(cfg)
        directory = Path(info["path"])
        if files_of(directory) != info["files"]:
            raise EvaltrailError(
                f"{directory}: changed since fetch_model recorded it in models/{cfg.name}/model.json; "
                f"run `dvc repro fetch_model@{cfg.name}`"
            )
        torch.set_num_threads(cfg.n_threads or os.cpu_count() or 1)
        self.torch = torch
        self.tok = AutoTokenizer.from_pretrained(directory, local_files_only=True)
        self.model = AutoModelForCausalLM.from_pretrained(
            directory, local_files_only=True, dtype=getattr(torch, hf.dtype)
        ).eval()
        self.window = hf.max_length or getattr(self.model.config, "max_position_embeddings", 2048)

    def _ids(self, text: str, special: bool = True) -> list[int]:
        return self.tok(text, add_special_tokens=special)["input_ids"]

    def _logprobs(self, tokens: list[int]):
        with self.torch.no_grad():
            logits = self.model(self.torch.tensor([tokens])).logits[0].double()
        return self.torch.log_softmax(logits, dim=-1)

    def loglikelihood(self, prompt: str, continuation: str) -> dict:
        t0 = time.perf_counter()
        stripped = prompt.rstrip(" ")
        continuation = prompt[len(stripped) :] + continuation
        ctx = self._ids(stripped)
        whole = self._ids(stripped + continuation)
        if whole[: len(ctx)] != ctx:  # merged across the boundary: score the continuation's own tokens
            whole = ctx + self._ids(continuation, special=False)
        n_cont = len(whole) - len(ctx)
        if n_cont >= self.window:
            raise EvaltrailError(
                f"params.yaml: model.{self.cfg.name}.hf.max_length={self.window} cannot hold a "
                f"{n_cont}-token continuation plus its context; raise it"
            )
        dropped = max(0, len(whole) - self.window)
        whole = whole[dropped:]
        lp = self._logprobs(whole)
        start = len(whole) - n_cont
        targets = self.torch.tensor(whole[start:])
        rows = lp[start - 1 : len(whole) - 1]
        picked = rows.gather(1, targets[:, None])[:, 0]
        greedy = bool((rows.argmax(dim=1) == targets).all())
        return {
            "text": None,
            "logprob": float(picked.sum()),
            "is_greedy": greedy,
            "token_logprobs": [float(x) for x in picked],
            "num_prompt_tokens": start,
            "num_output_tokens": n_cont,
            "num_evaluated_tokens": len(whole),
            "truncated_tokens": dropped,
            "rendered_prompt": None,
            "runtime_s": time.perf_counter() - t0,
        }

    def loglikelihood_rolling(self, text: str) -> dict:
        t0 = time.perf_counter()
        tokens = self._ids(text, special=False)
        first = self.tok.bos_token_id if self.tok.bos_token_id is not None else self.tok.eos_token_id
        width, lps = self.window - 1, []
        for start in range(0, len(tokens), width):
            window = [first if start == 0 else tokens[start - 1]] + tokens[start : start + width]
            lp = self._logprobs(window)
            lps += [float(lp[i, window[i + 1]]) for i in range(len(window) - 1)]
        return {
            "text": None,
            "logprob": float(sum(lps)),
            "is_greedy": None,
            "token_logprobs": lps,
            "num_prompt_tokens": 0,
            "num_output_tokens": len(tokens),
            "num_evaluated_tokens": len(tokens),
            "truncated_tokens": 0,
            "rendered_prompt": None,
            "runtime_s": time.perf_counter() - t0,
        }

    def generate(self, prompt: str, max_tokens: int, stop: list[str], sampling: dict | None = None) -> dict:
        t0 = time.perf_counter()
        draw = None
        if sampling is not None:  # the embedded backend's rule (Gumbel-max over the row), on torch's logits
            from .llama_cpp import draw_token

            draw = (float(sampling["temperature"]), np.random.default_rng(int(sampling["seed"])))
        if max_tokens >= self.window:
            raise EvaltrailError(
                f"params.yaml: model.{self.cfg.name}.hf.max_length={self.window} cannot hold "
                f"{max_tokens} generated tokens plus a prompt; raise it"
            )
        tokens = self._ids(prompt)
        dropped = max(0, len(tokens) - (self.window - max_tokens))
        tokens = tokens[dropped:]
        out, lps, text = [], [], ""
        eos = self.tok.eos_token_id
        for _ in range(max_tokens):  # one token at a time: the logprob of each is recorded
            lp = self._logprobs(tokens + out)[-1]
            tok = int(lp.argmax()) if draw is None else draw_token(np.asarray(lp, dtype=np.float64), *draw)
            if tok == eos:
                break
            out.append(tok)
            lps.append(float(lp[tok]))
            text = self.tok.decode(out, skip_special_tokens=True)
            hit = min((text.index(s) for s in stop if s and s in text), default=None)
            if hit is not None:
                text = text[:hit]
                break
        return {
            "text": text,
            "logprob": float(sum(lps)),
            "is_greedy": draw is None,
            "token_logprobs": lps,
            "num_prompt_tokens": len(tokens),
            "num_output_tokens": len(out),
            "num_evaluated_tokens": len(tokens) + len(out),
            "truncated_tokens": dropped,
            "rendered_prompt": None,
            "runtime_s": time.perf_counter() - t0,
        }
