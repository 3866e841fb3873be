"""Model backends, weight materialization and the request cache."""

from __future__ import annotations

from pathlib import Path

from ..config import ModelConfig
from ..errors import EvaltrailError

BACKENDS = ("llama_cpp",)


def _module(cfg: ModelConfig):
    if cfg.backend == "llama_cpp":
        from . import llama_cpp
        return llama_cpp
    raise EvaltrailError(f"params.yaml: model.{cfg.name}.backend: unknown backend {cfg.backend!r}; "
                         f"valid: {', '.join(BACKENDS)}")


def identity(cfg: ModelConfig, sha256: str) -> dict:
    """The model's identity as the request cache and MLflow record it (no weights loaded)."""
    return _module(cfg).identity(cfg, sha256)


def load_backend(cfg: ModelConfig, weights: Path, sha256: str):
    """Load the model (slow): only when some request is not cached."""
    return _module(cfg).LlamaCppBackend(cfg, weights, sha256)
