"""An infer stage sharded across a Ray cluster started on loopback gives the local run's completions."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from .pipeline import copy_workspace, workspace_env
from .servers import free_port, wait_for

pytestmark = pytest.mark.e2e
SMOLLM = "smollm2_135m_instruct"
ray = pytest.importorskip("ray", reason="ray is not installed (the test extra installs it)")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """`ray start --head --block` on 127.0.0.1 with two CPUs, in a session of its own; yields its
    address. Teardown ends that session only: `ray stop` would also stop any other Ray cluster on
    the machine (e.g. one running a long evaluation)."""
    tmp = tmp_path_factory.mktemp("ray")
    port = free_port()
    ray_bin = Path(sys.executable).parent / "ray"
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    log = tmp / "ray-start.log"
    with log.open("w") as out:
        head = subprocess.Popen(
            [
                str(ray_bin),
                "start",
                "--head",
                "--block",
                "--node-ip-address",
                "127.0.0.1",
                "--port",
                str(port),
                "--num-cpus",
                "2",
                "--include-dashboard",
                "false",
                "--temp-dir",
                str(tmp),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    try:
        wait_for(head, lambda: "Ray runtime started" in log.read_text(), "ray start --head", log)
        yield f"127.0.0.1:{port}"
    finally:
        head.terminate()  # --block: the head stops the processes it started
        try:
            head.wait(timeout=60)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(head.pid, signal.SIGKILL)  # anything of this cluster left in its session


def test_sharded_infer_stage_matches_the_local_run(smoke_repo, tmp_path, cluster):
    ws = copy_workspace(smoke_repo, tmp_path / "ws")
    out = ws / "results" / "completions" / "hellaswag" / f"{SMOLLM}.parquet"
    local = pd.read_parquet(out)
    out.unlink()
    env = {
        **os.environ,
        **workspace_env(ws),
        "EVALTRAIL_CACHE": str(tmp_path / "cold-cache"),
        "EVALTRAIL_RAY_ADDRESS": cluster,
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    proc = subprocess.run(
        [sys.executable, "stages/infer.py", "hellaswag", SMOLLM], cwd=ws, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    sharded = pd.read_parquet(out)
    # measurements (wall time, what each worker's KV cache held) are in results/costs, not completions
    pd.testing.assert_frame_equal(sharded, local)
    assert "24 requests (0 from cache)" in proc.stdout


def test_a_served_model_is_not_sharded(cluster):
    from evaltrail.backends.distributed import RayShards
    from evaltrail.config import ModelConfig
    from evaltrail.errors import EvaltrailError

    with pytest.raises(EvaltrailError, match="only embedded models are sharded"):
        RayShards(ModelConfig(name="m", backend="openai", server={}), Path("x"), "0" * 64, cluster)


def test_a_worker_with_another_engine_refuses_before_answering():
    from evaltrail import engine
    from evaltrail.backends.distributed import _answer_chunk
    from evaltrail.errors import EvaltrailError

    here = str(engine.locate().resolve())
    other = {**engine.identity(), "sha256": "f" * 64}  # the stage's engine, as another node would not have it
    with pytest.raises(EvaltrailError, match="run `dvc repro build_engine` in the same checkout path on every node"):
        _answer_chunk(None, b"", "0" * 64, [("k", {})], lambda backend, content: None, here, other)


def test_chunks_keep_order_balance_the_workers_and_stay_small():
    from evaltrail.backends.distributed import CHUNKS_PER_WORKER, MAX_CHUNK, cut

    small = cut(list(range(24)), 2)  # the smoke stage above: 8 chunks of 3
    assert [len(c) for c in small] == [3] * 8 and sum(small, []) == list(range(24))
    big = cut(list(range(40_168)), 2)  # HellaSwag's full set: cached every MAX_CHUNK answers, not in eighths
    assert max(map(len, big)) == MAX_CHUNK and len(big) == -(-40_168 // MAX_CHUNK) > 2 * CHUNKS_PER_WORKER
    assert sum(big, []) == list(range(40_168))
    assert cut([], 2) == [] and cut(["a"], 4) == [["a"]]
