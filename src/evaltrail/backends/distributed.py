"""An infer stage's requests sharded across a Ray cluster (`EVALTRAIL_RAY_ADDRESS`).

The requests still missing from the cache are cut, in their sorted order (so shared prompt
prefixes stay together), into chunks that run as Ray tasks; each task loads the embedded model
from the weights this machine verified (shipped through Ray's object store, so a worker on
another machine needs no copy) and answers its chunk. Answers come back to the stage, which
caches each as it arrives, exactly as in a local run. The embedded backend's answers do not
depend on which requests ran before them in a process, so the completions are the local run's,
provided every node loads the same llama.cpp engine build: a worker checks the engine's identity
first and refuses otherwise (the cache key names the stage's engine).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import tempfile
from pathlib import Path
from typing import Callable, Iterator

from ..config import ModelConfig
from ..errors import EvaltrailError

ADDRESS_ENV = "EVALTRAIL_RAY_ADDRESS"
"""A Ray cluster address ("auto", "host:port", "ray://host:10001"); unset: infer runs locally."""
CHUNKS_PER_WORKER = 4
"""Chunks per available worker slot, at least: smaller chunks balance load, each costs one model load."""
MAX_CHUNK = 256
"""Requests per chunk, at most: a chunk's answers reach the cache only when the whole chunk is done,
so a full evaluation set (tens of thousands of requests) is cached every few minutes, not in
eighths, and an interrupted run loses little."""


def cut(items: list, slots: int) -> list[list]:
    """Consecutive chunks of the sorted requests (shared prompt prefixes stay together): at least
    CHUNKS_PER_WORKER per worker slot, at most MAX_CHUNK requests each."""
    size = max(1, min(MAX_CHUNK, math.ceil(len(items) / (slots * CHUNKS_PER_WORKER))))
    return [items[i : i + size] for i in range(0, len(items), size)]


def _answer_chunk(
    cfg: ModelConfig, weights, sha256: str, items: list, call: Callable, engine_dir: str, expected: dict
) -> list:
    """Runs inside a Ray worker: check its engine, materialize the weights once per node, answer the chunk."""
    from .. import engine
    from . import load_backend

    os.environ[engine.ENGINE_ENV] = engine_dir
    here = engine.identity() if (Path(engine_dir) / engine.INFO).is_file() else None
    if here != expected:  # another build rounds differently: the answers would not be the local run's
        raise EvaltrailError(
            f"{ADDRESS_ENV}: a Ray worker's llama.cpp engine at {engine_dir} is {here}, the stage's "
            f"is {expected}; run `dvc repro build_engine` in the same checkout path on every node"
        )

    path = Path(tempfile.gettempdir()) / "evaltrail-ray" / f"{sha256}.gguf"
    if not path.is_file():
        data = weights if isinstance(weights, bytes) else bytes(weights)
        if hashlib.sha256(data).hexdigest() != sha256:
            raise EvaltrailError(f"weights shipped to the Ray worker do not hash to {sha256}")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.part")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    backend = load_backend(cfg, path, sha256)
    return list(backend.map_requests(items, call))  # the chunk's loglikelihoods packed together


class RayShards:
    """A stand-in backend for run_requests: map_requests fans the requests out as Ray tasks."""

    def __init__(self, cfg: ModelConfig, weights: Path, sha256: str, address: str):
        if cfg.backend != "llama_cpp":
            raise EvaltrailError(
                f"{ADDRESS_ENV}: only embedded models are sharded over Ray; model.{cfg.name} is "
                f"{cfg.backend} (its server scales on its own; raise server.concurrency)"
            )
        import ray

        self.cfg, self.weights, self.sha256 = cfg, weights, sha256
        try:
            ray.init(address=address, ignore_reinit_error=True, log_to_driver=False, include_dashboard=False)
        except Exception as exc:  # ConnectionError and Ray's own
            raise EvaltrailError(
                f"{ADDRESS_ENV}={address}: cannot join the Ray cluster ({exc}); start one with "
                f"`ray start --head` or unset it to run locally"
            ) from None
        self.threads = cfg.n_threads or 1
        self.slots = max(1, int(ray.cluster_resources().get("CPU", 1) // self.threads))

    def map_requests(self, items: list[tuple[str, dict]], call: Callable) -> Iterator[tuple[str, dict]]:
        import ray

        from .. import engine

        chunks = cut(items, self.slots)
        task = ray.remote(num_cpus=self.threads, max_retries=2)(_answer_chunk)
        weights = ray.put(self.weights.read_bytes())
        cfg = dataclasses.replace(self.cfg, n_threads=self.threads)  # what Ray reserved, not every core
        here = str(engine.locate().resolve())  # the stage's engine, which its cache key names
        pending = [task.remote(cfg, weights, self.sha256, chunk, call, here, engine.identity()) for chunk in chunks]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            yield from ray.get(done[0])
