"""Content hashes: file digests for pinning, and stable ids for instances and requests."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

_CHUNK = 1 << 20


def file_digest(path: str | Path, algo: str = "sha256") -> str:
    """Hex digest of a file's bytes, read in 1 MiB chunks."""
    h = hashlib.new(algo)
    with open(path, "rb") as f:
        while block := f.read(_CHUNK):
            h.update(block)
    return h.hexdigest()


def sha256_file(path: str | Path) -> str:
    return file_digest(path, "sha256")


def md5_file(path: str | Path) -> str:
    """DVC 3's hash of a file output (plain md5 of the bytes)."""
    return file_digest(path, "md5")


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace: equal content, equal bytes."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def stable_id(obj: Any, length: int = 16) -> str:
    """Truncated sha256 of the canonical JSON of `obj`: the same content always has the same id."""
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()[:length]
