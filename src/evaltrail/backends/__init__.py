"""Model backends, what fetch_model records of a model, and the request cache.

`llama_cpp` runs pinned GGUF weights in-process; `openai` talks to a served model; `hf` runs a
local transformers directory. Each way models/<model>/model.json says what the model is (weights
sha256, the server's identity, or every file's sha256) and
the request cache is keyed by the backend's identity of it."""

from __future__ import annotations

from pathlib import Path

from ..config import BACKEND_NEEDS, ModelConfig
from ..errors import EvaltrailError


def _module(cfg: ModelConfig):
    if cfg.backend == "llama_cpp":
        from . import llama_cpp

        return llama_cpp
    if cfg.backend == "openai":
        from . import openai

        return openai
    if cfg.backend == "hf":
        try:
            from . import hf
        except ImportError as exc:
            raise EvaltrailError(
                f"params.yaml: model.{cfg.name}.backend: hf needs the optional extra (`pip install -e '.[hf]'`): {exc}"
            ) from None
        return hf
    raise EvaltrailError(
        f"params.yaml: model.{cfg.name}.backend: unknown backend {cfg.backend!r}; valid: {', '.join(BACKEND_NEEDS)}"
    )


def fetch(cfg: ModelConfig, model_dir: Path, cache_dir: Path) -> dict:
    """Materialize what the model is under model_dir (weights, or the server's identity); return model.json."""
    if cfg.backend in ("openai", "hf"):
        from ..io import atomic_dir, write_json

        module = _module(cfg)
        info = module.probe(cfg) if cfg.backend == "openai" else module.describe(cfg)
        with atomic_dir(model_dir) as tmp:
            write_json(tmp / "model.json", info)
        return info
    _module(cfg)  # unknown backends fail by name
    from .weights import materialize

    return materialize(cfg, model_dir, cache_dir)


def identity(cfg: ModelConfig, sha256: str, window: int = 0) -> dict:
    """An embedded model's identity as the request cache and MLflow record it (no weights loaded)."""
    return _module(cfg).identity(cfg, sha256, window)


def load_backend(cfg: ModelConfig, weights: Path, sha256: str):
    """Load embedded weights (slow): only when some request is not cached."""
    return _module(cfg).LlamaCppBackend(cfg, weights, sha256)


def model_identity(cfg: ModelConfig, info: dict) -> dict:
    """Any backend's identity of the model, from its models/<model>/model.json."""
    if cfg.backend in ("openai", "hf"):
        return _module(cfg).identity(cfg, info)
    if "sliding_window" not in info:  # written by fetch_model since the sliding-window fix
        raise EvaltrailError(
            f"models/{cfg.name}/model.json: no 'sliding_window' (written before the packed executor's "
            f"sliding-window fix); run `dvc repro fetch_model@{cfg.name}`"
        )
    return identity(cfg, info["sha256"], info["sliding_window"])


def open_model(cfg: ModelConfig, model_dir: Path, info: dict):
    """Any backend, ready for requests: embedded weights verified against the pin first."""
    if cfg.backend == "openai":
        return _module(cfg).OpenAIBackend(cfg, info)
    if cfg.backend == "hf":
        return _module(cfg).HFBackend(cfg, info)
    from .weights import verified_weights, weights_path

    path = weights_path(model_dir)
    return load_backend(cfg, path, verified_weights(cfg, path, info))
