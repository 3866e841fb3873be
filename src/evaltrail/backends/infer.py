"""Run a scenario's requests through a model, serving finished ones from the request cache."""

from __future__ import annotations

import re
from typing import Callable

import pandas as pd
import pyarrow as pa
from tqdm import tqdm

from ..schema import COMPLETIONS_SCHEMA, content
from .cache import RequestCache, cache_key

_CONTENT = ["method", "prompt", "continuation", "max_tokens", "stop", "temperature", "seed"]
"""The prompts columns a request's content is made of (schema.content)."""


def _content(row) -> dict:
    def given(x):
        return None if pd.isna(x) else x

    max_tokens, seed = given(row.max_tokens), given(row.seed)
    return content(
        row.method,
        row.prompt,
        given(row.continuation),
        None if max_tokens is None else int(max_tokens),
        row.stop,
        given(row.temperature),
        None if seed is None else int(seed),
    )


def request_contents(frame: pd.DataFrame) -> list[dict]:
    """Each row's request content (what the cache keys on), in order. A frame without the sampling
    columns (a judge's own requests) holds greedy requests."""
    return [_content(r) for r in frame.reindex(columns=_CONTENT).itertuples(index=False)]


def _call(backend, c: dict) -> dict:
    if c["method"] == "generate" and "sampling" in c:
        return backend.generate(c["prompt"], c["max_tokens"], c["stop"], sampling=c["sampling"])
    if c["method"] == "generate":
        return backend.generate(c["prompt"], c["max_tokens"], c["stop"])
    if c["method"] == "loglikelihood":
        return backend.loglikelihood(c["prompt"], c["continuation"])
    if c["method"] == "loglikelihood_rolling":
        return backend.loglikelihood_rolling(c["prompt"])
    raise NotImplementedError(f"method {c['method']} is not supported by this backend yet")


_SURROGATE = re.compile("[\ud800-\udfff]")


def _valid_text(answer: dict) -> dict:
    """A generation as valid UTF-8: bytes a server or detokenizer could not decode (a lone
    surrogate from a JSON escape) become U+FFFD, so Parquet can store what is scored."""
    text = answer.get("text")
    if isinstance(text, str):
        clean = _SURROGATE.sub("\ufffd", text)
        if clean != text:
            answer = {**answer, "text": clean}
    return answer


def run_requests(
    prompts: pd.DataFrame, identity: dict, cache: RequestCache, load: Callable[[], object], desc: str = "infer"
) -> tuple[pa.Table, int]:
    """Completions in the prompts' row order, and how many were computed now (not cached).

    The model is loaded only if something is missing; missing requests (and cached rows that fail
    their check) run sorted by prompt so consecutive ones share KV-cache prefixes. A cached answer
    keeps the runtime measured when it was computed, so re-running from the cache reproduces the
    same bytes."""
    contents = request_contents(prompts)
    keys = [cache_key(identity, c) for c in contents]
    requests = dict(zip(keys, contents))
    done = cache.serve(requests)
    todo = sorted(
        ((k, c) for k, c in requests.items() if k not in done),
        key=lambda kc: (kc[1]["prompt"], kc[1]["continuation"] or "", kc[0]),
    )
    if todo:
        backend = load()
        # a served backend runs several at once and yields them as they finish; each is cached
        # (committed) the moment it arrives, by this thread alone
        answers = (
            backend.map_requests(todo, _call)
            if hasattr(backend, "map_requests")
            else ((key, _call(backend, content)) for key, content in todo)
        )
        for key, answer in tqdm(answers, total=len(todo), desc=desc, unit="req", mininterval=1.0):
            # the stored answer, not ours, when another run sharing the cache stored its own first
            done[key] = cache.put(key, _valid_text(answer), requests[key])
    rows = []
    for rid, key in zip(prompts["request_id"], keys):
        c = done[key]
        rows.append(
            {
                "request_id": rid,
                **{k: c[k] for k in COMPLETIONS_SCHEMA.names if k in c},
                "model_sha256": identity["sha256"],
            }
        )
    return pa.Table.from_pylist(rows, schema=COMPLETIONS_SCHEMA), len(todo)
