"""`file` sources: a local file, your own data, pinned by sha256 like any other source.

``path`` is relative to the repository (the directory `dvc repro` runs in) or absolute. The file
is copied, never linked, so the raw directory holds the bytes that were verified; a changed file
fails fetch with both hashes named until the pin is updated.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ..errors import EvaltrailError

REQUIRED = ("path",)


def check(spec: dict, where: str) -> None:
    """Refuse, before any I/O, a path that is not a plain string."""
    if not isinstance(spec["path"], str) or not spec["path"].strip():
        raise EvaltrailError(f"{where}.path: expected a file path (relative to the repository, or absolute)")


def fetch(spec: dict, dest: Path, cache_dir: Path, where: str) -> str:
    src = Path(spec["path"])
    if not src.is_file():
        raise EvaltrailError(
            f"{where}.path: no such file {src} (relative paths are read from the repository root, {Path.cwd()})"
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest)
    return "file"
