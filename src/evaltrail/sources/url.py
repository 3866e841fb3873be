"""`url` sources: an https URL pinned to an immutable revision, with an offline mirror fallback.

The canonical URL is tried first; if it cannot be reached and EVALTRAIL_MIRROR names a
directory, the same file is read from ``$EVALTRAIL_MIRROR/<host>/<path>``. Either way the
caller verifies the sha256, so both routes give the same bytes or fail.
"""

from __future__ import annotations

import os
import shutil
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import EvaltrailError

REQUIRED = ("url",)
MIRROR_ENV = "EVALTRAIL_MIRROR"
TIMEOUT_S = 20


def mirror_path(url: str, mirror: str | Path) -> Path:
    parts = urlsplit(url)
    return Path(mirror) / parts.netloc / parts.path.lstrip("/")


def fetch(spec: dict, dest: Path, cache_dir: Path, where: str) -> str:
    url = spec["url"]
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as resp, open(dest, "wb") as out:
            shutil.copyfileobj(resp, out, 1 << 20)
        return "canonical"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
    mirror = os.environ.get(MIRROR_ENV)
    if not mirror:
        raise EvaltrailError(f"{where}: cannot download {url} ({reason}) and {MIRROR_ENV} is not set; "
                             f"set it to an offline mirror directory")
    candidate = mirror_path(url, mirror)
    if not candidate.is_file():
        raise EvaltrailError(f"{where}: cannot download {url} ({reason}) and the mirror has no "
                             f"{candidate}")
    shutil.copyfile(candidate, dest)
    return f"mirror {candidate}"
