"""Atomic, deterministic writes: a failed stage never leaves a half-written or clobbered output."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.parquet as pq


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temp path beside `path`; on success rename it over `path`, on error delete it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        tmp_path.unlink(missing_ok=True)


@contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Yield an empty staging directory beside `path`; on success it replaces `path` whole."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    old = path.with_name(f".{path.name}.old")
    try:
        yield staging
        shutil.rmtree(old, ignore_errors=True)
        if path.is_dir():
            os.replace(path, old)
        elif path.exists():  # an earlier layout's file of the same name
            path.unlink()
        os.replace(staging, path)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def write_text(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: str | Path, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def write_parquet(path: str | Path, table: pa.Table, metadata: dict[str, str] | None = None) -> None:
    """Parquet without wall-clock metadata, so equal tables give byte-identical files; `metadata`
    (deterministic strings) goes into the schema."""
    table = table.replace_schema_metadata(metadata)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd", write_statistics=False, store_schema=True)


def read_text(path: str | Path, fix: str = "re-encode it as UTF-8") -> str:
    """A text input decoded as UTF-8; anything else is one line naming the file, line and byte
    (decoded whole, so the byte offset is the file's, not a read buffer's)."""
    from .errors import EvaltrailError

    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise EvaltrailError(f"{path}:{line}: not UTF-8 text (byte {exc.start}); {fix}") from None


def read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def computed_by(completions: str | Path) -> dict | None:
    """The engine a completions file's answers were computed with (its schema metadata), if any."""
    from .schema import IDENTITY_KEY

    meta = pq.read_schema(completions).metadata or {}
    raw = meta.get(IDENTITY_KEY.encode())
    return json.loads(raw).get("engine") if raw else None
