"""Reliability of the real pipeline: infer killed with SIGKILL again and again resumes to the
same completions (nothing lost, nothing duplicated), and two clean runs are byte-identical."""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import time

import pandas as pd
import pytest
import yaml

from evaltrail.backends.infer import _CONTENT, _content

from .pipeline import copy_workspace, dvc, new_workspace, workspace_env

pytestmark = pytest.mark.e2e
SMOLLM = "smollm2_135m_instruct"
KILLS = 10


def cached_rows(db) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            return conn.execute("SELECT COUNT(*) FROM completions").fetchone()[0]
    except sqlite3.OperationalError:  # the table is not created yet
        return 0


def test_infer_killed_repeatedly_resumes_to_identical_completions(smoke_repo, tmp_path):
    """SIGKILL at random points, each after 1-3 more requests were committed: the final run's
    completions equal the uninterrupted run's (same texts, logprobs, token counts), the request
    cache holds each request exactly once, and no kill left a partial output behind."""
    ws = copy_workspace(smoke_repo, tmp_path / "ws")
    cache_dir = tmp_path / "cold-cache"
    env = {**os.environ, **workspace_env(ws), "EVALTRAIL_CACHE": str(cache_dir)}
    out = ws / "results" / "completions" / "mmlu" / f"{SMOLLM}.parquet"
    reference = pd.read_parquet(out)
    out.unlink()
    db, rng, kills, progress = cache_dir / "requests.sqlite", random.Random(0), 0, []
    cmd = [sys.executable, "stages/infer.py", "mmlu", SMOLLM]
    while kills < KILLS:
        before, step = cached_rows(db), rng.randint(1, 3)
        proc = subprocess.Popen(cmd, cwd=ws, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while proc.poll() is None and cached_rows(db) < before + step and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, (
            f"infer finished after {kills} kills; the scenario is too small to kill {KILLS} times"
        )
        proc.kill()
        proc.wait()
        kills += 1
        progress.append(cached_rows(db))
        assert not out.exists()  # a killed stage leaves no (partial) output
    assert progress == sorted(progress) and progress[-1] < len(reference)
    subprocess.run(cmd, cwd=ws, env=env, check=True, capture_output=True)
    resumed = pd.read_parquet(out)
    pd.testing.assert_frame_equal(resumed, reference)  # completions hold no measurements: equal as a whole
    prompts = pd.read_parquet(ws / "data" / "prompts" / "mmlu.parquet")
    assert resumed["request_id"].is_unique and set(resumed["request_id"]) == set(prompts["request_id"])
    distinct = {json.dumps(_content(r), sort_keys=True) for r in prompts[_CONTENT].itertuples(index=False)}
    assert cached_rows(db) == len(distinct)  # each request cached once: none lost, none twice


def test_two_clean_runs_are_byte_identical(smoke_repo, tmp_path):
    """A second fresh copy of the project runs `dvc exp run -S suite=smoke` from scratch: every
    output dvc.lock hashes has the first run's md5. Inference is served from a copy of the first
    run's request cache, because a completion carries its measured wall time (the efficiency
    family's input), which no rerun can reproduce; what the model computes is compared cold in
    the kill/resume test above. Left out: files DVC does not cache because they describe the
    run itself (each infer stage's cost report, the MLflow run ids)."""
    repo = tmp_path / "second"
    repo.mkdir()
    cache = tmp_path / "cache"
    cache.mkdir()
    shutil.copy2(smoke_repo.parent / "cache" / "requests.sqlite", cache / "requests.sqlite")
    with pytest.MonkeyPatch.context() as mp:
        for k, v in workspace_env(repo).items():
            mp.setenv(k, v)
        new_workspace(repo)
        ran = dvc(repo, "exp", "run", "-S", "suite=smoke").stdout

    def outs(ws) -> dict[str, str]:
        lock = yaml.safe_load((ws / "dvc.lock").read_text())["stages"]
        return {
            o["path"]: o["md5"]
            for st in lock.values()
            for o in st.get("outs", [])
            if not o["path"].startswith("results/costs/") and o["path"] != "results/mlflow_runs.json"
        }

    first, second = outs(smoke_repo), outs(repo)
    assert "Running stage 'fetch@mmlu'" in ran and "Running stage 'score@hellaswag-" in ran
    assert len(first) >= 20 and first == second
