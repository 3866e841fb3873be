"""Materialize a model's GGUF weights under models/<model>/ from its pinned parts and verify the sha256."""

from __future__ import annotations

import os
from pathlib import Path

from ..config import ModelConfig
from ..errors import EvaltrailError
from ..io import atomic_dir, write_json
from ..sources import assemble, verify

WEIGHTS = "weights.gguf"
INFO = "model.json"


def weights_path(model_dir: Path) -> Path:
    return Path(model_dir) / WEIGHTS


def materialize(cfg: ModelConfig, model_dir: Path, cache_dir: Path) -> dict:
    """Assemble the weights and write model.json in a staging directory that replaces `model_dir`
    only once the hash matches; return the info."""
    where = f"params.yaml: model.{cfg.name}.weights"
    w = cfg.weights or {}
    if not w.get("sha256") or not w.get("parts"):
        raise EvaltrailError(f"{where}: needs 'sha256' and a non-empty 'parts' list")
    with atomic_dir(model_dir) as tmp:
        assemble(list(w["parts"]), tmp / WEIGHTS, w["sha256"], cache_dir, where)
        info = {
            "name": cfg.name,
            "backend": cfg.backend,
            "sha256": w["sha256"],
            "bytes": os.path.getsize(tmp / WEIGHTS),
            "license": w.get("license"),
            "parts": list(w["parts"]),
        }
        write_json(tmp / INFO, info)
    return info


def verified_weights(cfg: ModelConfig, path: Path, info: dict) -> str:
    """The weights' sha256, after checking the file on disk against the pin."""
    expected = (cfg.weights or {}).get("sha256")
    if info.get("sha256") != expected:
        raise EvaltrailError(
            f"{path}: built for sha256 {info.get('sha256')}, but params.yaml pins "
            f"{expected}; run `dvc repro fetch_model@{cfg.name}`"
        )
    if not Path(path).is_file():
        raise EvaltrailError(f"{path}: missing; run `dvc repro fetch_model@{cfg.name}`")
    return verify(path, expected, str(path))
