"""Helpers for tests that drive the real pipeline: run commands in a workspace, copy one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def sh(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(list(args), cwd=repo, env=env, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def dvc(repo: Path, *args: str, check: bool = True):
    return sh(repo, sys.executable, "-m", "dvc", *args, check=check)


def trace(repo: Path, scenario: str, model: str, metric: str, check: bool = True):
    return sh(
        repo,
        sys.executable,
        "-m",
        "evaltrail.cli",
        "trace",
        "--scenario",
        scenario,
        "--model",
        model,
        "--metric",
        metric,
        check=check,
    )


def tracked_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    # results/ starts empty but for the READMEs that keep judged-result directories in git
    return [
        f
        for f in out
        if f
        and (not f.startswith(("results/", "bench/")) or f.endswith("/README.md"))
        and f != "dvc.lock"
        and (ROOT / f).is_file()
    ]


def new_workspace(repo: Path) -> Path:
    """A fresh copy of the project's tracked files at `repo`, as a git repository with one commit
    (`dvc exp run` commits, so it needs a committer)."""
    for f in tracked_files():
        (repo / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, repo / f)
    sh(repo, "git", "init", "-q")
    sh(repo, "git", "config", "user.email", "e2e@evaltrail.invalid")
    sh(repo, "git", "config", "user.name", "evaltrail e2e")
    sh(repo, "git", "add", "-A")
    sh(repo, "git", "commit", "-qm", "copy")
    return repo


def workspace_env(repo: Path) -> dict[str, str]:
    """The environment a run workspace made by the smoke_repo fixture uses: its own request cache
    and MLflow store."""
    return {"EVALTRAIL_CACHE": str(repo.parent / "cache"), "MLFLOW_TRACKING_URI": f"sqlite:///{repo}/mlflow.db"}


def copy_workspace(src: Path, dst: Path) -> Path:
    """A working copy of a run workspace (git, DVC cache, MLflow store); DVC's read-only cache
    files are hard-linked, everything else copied."""

    def copy(a: str, b: str) -> None:
        if f"{os.sep}.dvc{os.sep}cache{os.sep}" in a:
            os.link(a, b)
        else:
            shutil.copy2(a, b)

    shutil.copytree(src, dst, symlinks=True, copy_function=copy)
    return dst


@contextmanager
def suite_run(parent: Path, *settings: str):
    """A fresh workspace under `parent` after `dvc exp run -S <setting> ...`, with its own request
    cache and MLflow store set in the environment while the context lasts."""
    repo = parent / "repo"
    repo.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        for k, v in workspace_env(repo).items():
            mp.setenv(k, v)
        new_workspace(repo)
        dvc(repo, "exp", "run", *[arg for s in settings for arg in ("-S", s)])
        yield repo
