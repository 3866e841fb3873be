"""`url` sources: an https URL pinned to an immutable revision, with an offline mirror fallback.

The canonical URL is tried first; if it cannot be reached and EVALTRAIL_MIRROR names a
directory, the same file is read from ``$EVALTRAIL_MIRROR/<host>/<path>``. Either way the
caller verifies the sha256, so both routes give the same bytes or fail.
"""

from __future__ import annotations

import os
import re
import shutil
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ..errors import EvaltrailError

REQUIRED = ("url",)
MIRROR_ENV = "EVALTRAIL_MIRROR"
TIMEOUT_S = 20


def _plain_https(url: object) -> bool:
    """https to a named host, without user@ and without '.' or '..' segments."""
    # urlopen also reads file://, http:// and data: URLs. Dot segments (also %-encoded or behind a
    # backslash, which servers may read as '/') are resolved by the server, so the URL would not name
    # the file it seems to pin, and they climb out of the mirror. Credentials would be shared through
    # params.yaml, messages and SOURCES.json.
    try:
        parts = urlsplit(url) if isinstance(url, str) else None
    except ValueError:  # e.g. an unclosed IPv6 bracket
        return False
    if parts is None or parts.scheme != "https" or not parts.hostname or "@" in parts.netloc:
        return False
    segments = re.split(r"[/\\]", f"{parts.netloc}/{unquote(parts.path)}")
    return not any(seg in (".", "..") for seg in segments)


def check(spec: dict, where: str) -> None:
    """Refuse, before any I/O, a URL other than plain https to a named host."""
    if not _plain_https(spec["url"]):
        raise EvaltrailError(
            f"{where}: url {spec['url']!r} refused: url sources must be https URLs pinned to "
            f"an immutable revision (a host name, no user@, no '.' or '..' path segments)"
        )


def mirror_path(url: str, mirror: str | Path) -> Path:
    parts = urlsplit(url)
    return Path(mirror) / parts.netloc / parts.path.lstrip("/")


def _inside_mirror(url: str, mirror: str | Path, where: str) -> Path:
    """The mirror's copy of `url`, resolved (symlinks too); refused unless it lies under the resolved mirror."""
    candidate = mirror_path(url, mirror)
    real, root = candidate.resolve(), Path(mirror).resolve()
    if not real.is_relative_to(root):
        raise EvaltrailError(
            f"{where}: mirror file {candidate} for {url} resolves outside {MIRROR_ENV} ({root}); "
            f"refusing to read it (fix the url or the mirror's symlinks)"
        )
    return real


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
        raise EvaltrailError(
            f"{where}: cannot download {url} ({reason}) and {MIRROR_ENV} is not set; "
            f"set it to an offline mirror directory"
        )
    real = _inside_mirror(url, mirror, where)
    if not real.is_file():
        raise EvaltrailError(
            f"{where}: cannot download {url} ({reason}) and the mirror has no {mirror_path(url, mirror)}"
        )
    shutil.copyfile(real, dest)
    return f"mirror {real}"
