"""Read dvc.lock and recompute DVC's md5 of files and directories to check them against it."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import yaml

from ..hashing import md5_file

LOCK_FILE = Path("dvc.lock")


def load_lock(path: Path = LOCK_FILE) -> dict:
    if not path.is_file():
        return {}
    with open(path, encoding="utf-8") as f:
        return (yaml.safe_load(f) or {}).get("stages", {})


def recorded_md5(lock: dict, stage: str, path: str | Path, section: str = "outs") -> str | None:
    """The md5 dvc.lock holds for `path` among a stage's deps or outs."""
    for entry in lock.get(stage, {}).get(section, []) or []:
        if Path(entry["path"]) == Path(path):
            return entry.get("md5")
    return None


def dvc_md5(path: str | Path) -> str:
    """DVC 3's md5 of a file (of its bytes) or a directory (of its sorted listing, + '.dir')."""
    path = Path(path)
    if path.is_file():
        return md5_file(path)
    entries = sorted(
        ({"md5": md5_file(p), "relpath": p.relative_to(path).as_posix()} for p in path.rglob("*") if p.is_file()),
        key=lambda e: e["relpath"],
    )
    listing = json.dumps(entries, sort_keys=True).encode("utf-8")
    return hashlib.md5(listing).hexdigest() + ".dir"


# What decides a number besides pinned data: code and config. A run in progress always has
# results and dvc.lock modified, so a run's own commit tag leaves them out; `trace`, which
# vouches for finished numbers, counts a modified dvc.lock too (the hashes it checks against).
CODE_PATHS = ("src", "stages", "conf", "dvc.yaml", "params.yaml", "pyproject.toml")
TRACE_PATHS = (*CODE_PATHS, "dvc.lock")


def git_commit(strict: bool = False) -> str:
    """HEAD's commit, '+dirty' when code or config (and with `strict`, dvc.lock) differ from it;
    'unknown' outside git."""
    paths = TRACE_PATHS if strict else CODE_PATHS
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", *paths],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")
