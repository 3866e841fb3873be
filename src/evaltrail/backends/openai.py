"""Served models: any OpenAI-compatible server (vLLM, llama.cpp's server, TGI, Ollama) over HTTP.

Generation uses /v1/completions (or /v1/chat/completions with `chat_template: true`); a
loglikelihood needs the server to return prompt logprobs (`echo` + `logprobs`), as the legacy
completions API defines them. Requests run `concurrency` at a time; a 429, a 5xx, a timeout or a
truncated body is retried with exponential backoff and jitter (tenacity) up to `max_retries`
times. The model's identity is what the server reports for it, probed once by fetch_model and
checked against every response: the client cannot verify a served model's weights, so a server
that swaps them under the same name goes unnoticed (model.json says so: `sha256_of`). The API key
is read from the environment variable the config names and only ever placed in a request header.
"""

from __future__ import annotations

import json
import os
import re
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Iterator

import httpx
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from ..config import SHA256_OF, ModelConfig, ServerConfig, build
from ..errors import EvaltrailError
from ..hashing import stable_id
from ..tracking import shown_uri

REVISION = 1
"""Bumped whenever this backend's outputs change meaning or fields, so old cache entries miss."""


class Transient(Exception):
    """A failure worth retrying: rate limit, server error, timeout, cut-off body."""


class ServerClient:
    """HTTP to one OpenAI-compatible server, with the retry budget and key handling in one place."""

    def __init__(self, cfg: ModelConfig):
        where = f"params.yaml: model.{cfg.name}.server"
        self.where = where
        self.server = build(ServerConfig, cfg.server, where)
        headers = {}
        if self.server.api_key_env:
            if _looks_like_a_key(self.server.api_key_env):  # never echoed: it may be the secret itself
                raise EvaltrailError(
                    f"{where}.api_key_env: looks like an API key, not an environment variable "
                    f"NAME; put the key in an environment variable and name that variable here"
                )
            key = os.environ.get(self.server.api_key_env)
            if not key:
                raise EvaltrailError(
                    f"{where}.api_key_env: environment variable {self.server.api_key_env} is not "
                    f"set; export it (the key is never read from a file)"
                )
            headers["Authorization"] = f"Bearer {key}"
        self.url = self.server.base_url.rstrip("/")
        self.http = httpx.Client(
            base_url=self.url,
            headers=headers,
            timeout=self.server.timeout_s,
            limits=httpx.Limits(max_connections=max(1, self.server.concurrency)),
        )

    def _once(self, method: str, path: str, payload: dict | None) -> dict:
        try:
            resp = self.http.request(method, path, json=payload)
        except (httpx.TimeoutException, httpx.TransportError) as exc:  # incl. a connection cut mid-body
            raise Transient(f"{type(exc).__name__}") from exc
        if resp.status_code == 429 or resp.status_code >= 500:
            raise Transient(f"HTTP {resp.status_code}")
        if resp.status_code >= 400:
            raise EvaltrailError(
                f"{self.where}: {shown_uri(self.url)}{path} answered HTTP {resp.status_code}: {resp.text[:300]!r}"
            )
        try:
            return resp.json()
        except json.JSONDecodeError as exc:  # a truncated body
            raise Transient("unparseable JSON body") from exc

    def call(self, method: str, path: str, payload: dict | None = None, check=None) -> dict:
        """One request, retried while transient; `check(body)` may raise Transient for a body that is
        well-formed JSON but cut short (missing fields)."""

        def attempt() -> dict:
            body = self._once(method, path, payload)
            if check:
                check(body)
            return body

        retrying = Retrying(
            stop=stop_after_attempt(self.server.max_retries + 1),
            wait=wait_random_exponential(multiplier=0.2, max=10),
            retry=retry_if_exception(lambda e: isinstance(e, Transient)),
            reraise=True,
        )
        try:
            return retrying(attempt)
        except Transient as exc:
            raise EvaltrailError(
                f"{self.where}: {shown_uri(self.url)}{path} still failing after "
                f"{self.server.max_retries} retries ({exc}); finished requests are cached, "
                f"re-run `dvc repro` to resume"
            ) from None


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def _looks_like_a_key(name: str) -> bool:
    """A value no environment variable is named like (`sk-...`, `Bearer ...`), or a long token with
    digits: of mixed-case letters (`hf_Ab3...`) or without an underscore between words (`3f9a...`)."""
    if not _ENV_NAME.fullmatch(name):
        return True
    digits, lower, upper = (any(f(c) for c in name) for f in (str.isdigit, str.islower, str.isupper))
    return len(name) >= 20 and digits and ((lower and upper) or "_" not in name)


def probe(cfg: ModelConfig) -> dict:
    """The server's own description of the configured model (from /models), for models/<m>/model.json."""
    client = ServerClient(cfg)
    listing = client.call("GET", "/models").get("data") or []
    ids = [m.get("id") for m in listing]
    if client.server.model not in ids:
        raise EvaltrailError(
            f"{client.where}.model: {client.server.model!r} is not served at "
            f"{shown_uri(client.url)}; it serves: {', '.join(map(str, ids)) or '(nothing)'}"
        )
    entry = next(m for m in listing if m.get("id") == client.server.model)
    # what names the model; volatile fields (created: often the server's clock) are left out
    served = {k: entry[k] for k in ("id", "owned_by", "root", "parent") if entry.get(k) is not None}
    return {
        "name": cfg.name,
        "backend": "openai",
        "base_url": shown_uri(client.url),
        "served": served,
        "sha256": stable_id(served, length=64),
        "sha256_of": SHA256_OF["openai"],
    }


def identity(cfg: ModelConfig, info: dict) -> dict:
    """What determines this backend's outputs: the server-reported model (not where it is hosted),
    the endpoint, and every field added to a request (`extra_body`: repeat_penalty, top_k,
    logit_bias, ...); the fixed decoding parameters (greedy, logprobs, echo) are REVISION's.

    `sha256` hashes the server's description of the model, not its weights: the client cannot
    verify what a server computes with, only what it says it serves."""
    ident = {"backend": "openai", "revision": REVISION, "served": info["served"], "sha256": info["sha256"]}
    if cfg.chat_template:
        ident["chat"] = True
    extra = (cfg.server or {}).get("extra_body")
    if extra:  # absent when empty: a cache without it keeps serving those answers
        ident["extra_body"] = extra
    return ident


def _has_choice(body: dict) -> None:
    if not body.get("choices"):
        raise Transient("response without choices")


class OpenAIBackend:
    def __init__(self, cfg: ModelConfig, info: dict):
        self.cfg, self.info = cfg, info
        self.client = ServerClient(cfg)
        self.model = self.client.server.model

    def _post(self, path: str, payload: dict) -> dict:
        body = self.client.call(
            "POST", path, {**self.client.server.extra_body, "model": self.model, **payload}, check=_has_choice
        )
        served = body.get("model")
        if served is not None and served != self.info["served"]["id"]:
            raise EvaltrailError(
                f"{self.client.where}: the server now answers as {served!r}, but "
                f"models/{self.cfg.name}/model.json recorded {self.info['served']['id']!r}; "
                f"run `dvc repro fetch_model@{self.cfg.name}`"
            )
        return body

    def generate(self, prompt: str, max_tokens: int, stop: list[str], sampling: dict | None = None) -> dict:
        t0 = time.perf_counter()
        common = {"max_tokens": max_tokens, "temperature": 0.0, "stop": [s for s in stop if s] or None}
        if sampling is not None:  # the server's own sampler: seeded, but reproducible only as far as the server is
            common.update(temperature=float(sampling["temperature"]), seed=int(sampling["seed"]))
        if self.cfg.chat_template:
            body = self._post(
                "/chat/completions", {**common, "messages": [{"role": "user", "content": prompt}], "logprobs": True}
            )
            choice = body["choices"][0]
            text = (choice.get("message") or {}).get("content") or ""
            lps = [c["logprob"] for c in ((choice.get("logprobs") or {}).get("content") or [])]
        else:
            body = self._post("/completions", {**common, "prompt": prompt, "logprobs": 1})
            choice = body["choices"][0]
            text = choice.get("text") or ""
            lps = [x for x in ((choice.get("logprobs") or {}).get("token_logprobs") or []) if x is not None]
        usage = body.get("usage") or {}
        n_prompt = int(usage.get("prompt_tokens") or 0)
        return {
            "text": text,
            "logprob": float(sum(lps)),
            "is_greedy": sampling is None,
            "token_logprobs": [float(x) for x in lps],
            "num_prompt_tokens": n_prompt,
            "num_output_tokens": int(usage.get("completion_tokens") or len(lps)),
            "num_evaluated_tokens": n_prompt,
            "truncated_tokens": 0,
            "rendered_prompt": None,
            "runtime_s": time.perf_counter() - t0,
        }

    def loglikelihood(self, prompt: str, continuation: str) -> dict:
        if self.cfg.chat_template:
            raise EvaltrailError(
                f"params.yaml: model.{self.cfg.name}.chat_template: chat endpoints return no "
                f"prompt logprobs; set it to false for loglikelihood scenarios"
            )
        t0 = time.perf_counter()
        stripped = prompt.rstrip(" ")  # a context's trailing spaces belong to the continuation, as in llama_cpp
        full = stripped + prompt[len(stripped) :] + continuation
        body = self._post(
            "/completions", {"prompt": full, "max_tokens": 1, "temperature": 0.0, "echo": True, "logprobs": 1}
        )
        lp = body["choices"][0].get("logprobs") or {}
        offsets, token_lps, tops = lp.get("text_offset"), lp.get("token_logprobs"), lp.get("top_logprobs")
        if not offsets or token_lps is None:
            raise EvaltrailError(
                f"{self.client.where}: {shown_uri(self.client.url)} returned no prompt logprobs "
                f"(`echo` + `logprobs`); loglikelihood scenarios need a server that does "
                f"(llama.cpp's server: --logits_all true; vLLM: yes)"
            )
        # continuation tokens: those starting inside it; the one generated token starts past the end
        idx = [i for i, off in enumerate(offsets) if len(stripped) <= off < len(full)]
        picked = [token_lps[i] for i in idx]
        if not idx or any(x is None for x in picked):
            raise EvaltrailError(f"{self.client.where}: no prompt logprobs for the continuation {continuation!r}")
        greedy = all(tops and tops[i] and token_lps[i] >= max(tops[i].values()) - 1e-6 for i in idx)
        n_prompt = int((body.get("usage") or {}).get("prompt_tokens") or len(offsets))
        return {
            "text": None,
            "logprob": float(sum(picked)),
            "is_greedy": bool(greedy),
            "token_logprobs": [float(x) for x in picked],
            "num_prompt_tokens": n_prompt - len(idx),
            "num_output_tokens": len(idx),
            "num_evaluated_tokens": n_prompt,
            "truncated_tokens": 0,
            "rendered_prompt": None,
            "runtime_s": time.perf_counter() - t0,
        }

    def loglikelihood_rolling(self, text: str) -> dict:
        raise EvaltrailError(
            f"params.yaml: model.{self.cfg.name}.backend: openai cannot score whole documents "
            f"(loglikelihood_rolling needs the first token's logprob, which echo omits); use an "
            f"embedded backend for language-modeling scenarios"
        )

    def map_requests(self, items: list[tuple[str, dict]], call) -> Iterator[tuple[str, dict]]:
        """(key, result) as requests finish, `concurrency` in flight; the first permanent failure
        is raised once the requests already in flight have finished (and been yielded)."""
        with ThreadPoolExecutor(max_workers=max(1, self.client.server.concurrency)) as pool:
            pending, queue, failure = set(), iter(items), None
            futures: dict = {}
            while True:
                while failure is None and len(pending) < max(1, self.client.server.concurrency):
                    nxt = next(queue, None)
                    if nxt is None:
                        break
                    fut = pool.submit(call, self, nxt[1])
                    futures[fut] = nxt[0]
                    pending.add(fut)
                if not pending:
                    break
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in finished:
                    if fut.exception() is not None:
                        failure = failure or fut.exception()
                    else:
                        yield futures[fut], fut.result()
            if failure is not None:
                raise failure
