"""Materialize a model's GGUF weights under models/ from its pinned parts and verify the sha256."""

from __future__ import annotations

import os
from pathlib import Path

from ..config import ModelConfig
from ..errors import EvaltrailError
from ..io import atomic_path, write_json
from ..sources import assemble, verify


def materialize(cfg: ModelConfig, dest: Path, info_path: Path, cache_dir: Path) -> dict:
    """Assemble the weights into `dest` (replaced only once the hash matches) and write the info."""
    where = f"params.yaml: model.{cfg.name}.weights"
    w = cfg.weights
    if not w.get("sha256") or not w.get("parts"):
        raise EvaltrailError(f"{where}: needs 'sha256' and a non-empty 'parts' list")
    with atomic_path(dest) as tmp:
        assemble(list(w["parts"]), tmp, w["sha256"], cache_dir, where)
    info = {"name": cfg.name, "backend": cfg.backend, "sha256": w["sha256"],
            "bytes": os.path.getsize(dest), "license": w.get("license"), "parts": list(w["parts"])}
    write_json(info_path, info)
    return info


def verified_weights(cfg: ModelConfig, path: Path, info: dict) -> str:
    """The weights' sha256, after checking the file on disk against the pin."""
    expected = cfg.weights["sha256"]
    if info.get("sha256") != expected:
        raise EvaltrailError(f"{path}: built for sha256 {info.get('sha256')}, but params.yaml pins "
                             f"{expected}; run `dvc repro fetch_model@{cfg.name}`")
    return verify(path, expected, str(path))
