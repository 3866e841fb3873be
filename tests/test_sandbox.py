"""The code sandbox: hostile completions fail with their reason, and the run and the machine are unharmed."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from evaltrail import sandbox
from evaltrail.adapters import get_adapter
from evaltrail.metrics.accuracy import FINISHED, program
from evaltrail.metrics.scoring import code_reasons, score_frame
from evaltrail.scenarios import loader_of

pytestmark = pytest.mark.skipif(sandbox.available() is not None, reason=f"{sandbox.available()} (.ci/run installs it)")

PROMPT = 'def add(a: int, b: int) -> int:\n    """Return the sum of a and b.\n    >>> add(2, 3)\n    5\n    """\n'
TEST = "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n"
LIMITS = sandbox.Limits(cpu_s=2, wall_s=5)


def run(body: str) -> sandbox.Outcome:
    return sandbox.run_python(program(PROMPT, body, TEST, "add"), LIMITS, finished=FINISHED)


def nobody_processes(settle_s: float = 10.0) -> int:
    """Processes of the sandbox's user once the last sandbox has had `settle_s` to tear down."""
    deadline = time.monotonic() + settle_s
    while True:
        out = subprocess.run(["ps", "-u", str(sandbox.NOBODY), "-o", "pid="], capture_output=True, text=True)
        if not out.stdout.split() or time.monotonic() > deadline:
            return len(out.stdout.split())
        time.sleep(0.2)


def test_a_correct_and_a_wrong_completion():
    right = run("    return a + b\n")
    assert (right.passed, right.reason) == (True, "passed")
    wrong = run("    return a - b\n")
    assert not wrong.passed and wrong.reason == "AssertionError"


@pytest.mark.slow  # about 20 s of CPU and wall-clock limits running out on purpose
def test_hostile_completions_fail_with_their_reason(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("host data")
    outside = Path.cwd() / f"evaltrail-sandbox-escape-{os.getpid()}"  # the checkout: writable on the host
    bystander = subprocess.Popen(["sleep", "60"])  # a process of the host the completion tries to kill
    hostile = {
        "infinite loop": ("    while True:\n        pass\n", "CPU time limit"),
        "sleeping forever": ("    import time\n    time.sleep(3600)\n", "timeout: still running after 5 s wall"),
        "fork bomb": ("    import os\n    while True:\n        os.fork()\n", "BlockingIOError: [Errno 11]"),
        "10 GB allocation": ("    x = bytearray(10 * 1024**3)\n    return a + b\n", "MemoryError"),
        "writing outside its directory": (
            f"    open({str(outside)!r}, 'w').write('x')\n    return a + b\n",
            "FileNotFoundError",  # no host directory is there
        ),
        "writing to the root": (
            "    open('/escaped', 'w').write('x')\n    return a + b\n",
            "OSError: [Errno 30] Read-only",
        ),
        "reading a file it was not given": (
            f"    return len(open({str(secret)!r}).read())\n",
            "FileNotFoundError",
        ),
        "opening a socket": (
            "    import socket\n    socket.create_connection(('1.1.1.1', 80), timeout=2)\n    return a + b\n",
            "OSError: [Errno 101] Network is unreachable",
        ),
        "killing its parent": (
            "    import os, signal\n    os.kill(os.getppid(), signal.SIGKILL)\n"
            f"    os.kill({os.getpid()}, signal.SIGKILL)\n"
            f"    os.kill({bystander.pid}, signal.SIGKILL)\n    return a - b\n",
            "",  # whichever it reaches first: no such process, or the wrong answer
        ),
        "a huge output": ("    while True:\n        print('x' * 10000)\n", "OSError: [Errno 27] File too large"),
        "exiting early with status 0": ("    import os\n    os._exit(0)\n", "exited before its test finished"),
        "top-level code exiting at once": ("    return a - b\nimport sys\nsys.exit(0)\n", "exited before its test"),
    }
    try:
        for name, (body, reason) in hostile.items():
            start = time.monotonic()
            outcome = run(body)
            assert not outcome.passed, name
            assert outcome.reason.startswith(reason), (name, outcome.reason)
            assert time.monotonic() - start < LIMITS.wall_s + 3, name  # the run moves on
        assert bystander.poll() is None  # the host process lives
        assert not outside.exists() and secret.read_text() == "host data"
        assert nobody_processes() == 0  # nothing left running
    finally:
        bystander.kill()


def test_the_sandbox_runs_as_nobody_without_capabilities():
    probe = (
        "import os\nstatus = open('/proc/self/status').read()\n"
        "assert os.getuid() != 0 and 'CapEff:\\t0000000000000000' in status, status\n"
        "seen = set(os.listdir('/'))\n"
        "assert seen <= {'bin', 'dev', 'lib', 'lib64', 'proc', 'sandbox', 'sbin', 'tmp', 'usr'}, seen\n"
        "assert os.getcwd() == '/sandbox', os.getcwd()\n"
    )
    outcome = sandbox.run_python(probe, LIMITS)
    assert outcome.passed, outcome.reason


def test_humaneval_canonical_solutions_pass_164_of_164_through_score_frame(fetched):
    """The real problems through the real scoring path: the canonical bodies pass every unit test,
    a body returning None fails every one, and each failure names its reason."""

    cfg, raw = fetched("humaneval")
    insts = loader_of(cfg).load(cfg, raw)["test"]
    cfg = dataclasses.replace(cfg, metrics=["pass_at_1"])  # token counts need real completions
    assert len(insts) == 164 and len({i.metadata["task_id"] for i in insts}) == 164

    def frame(body) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "instance_id": [i.instance_id for i in insts],
                "trial": 0,
                "method": "generate",
                "perturbation": None,
                "prompt": [i.input for i in insts],
                "text": [body(i) for i in insts],
                "metadata": [json.dumps(i.metadata) for i in insts],
                "references": [[{"text": r.text, "correct": r.correct} for r in i.references] for i in insts],
            }
        )

    canonical = frame(lambda i: i.references[0].text)
    scores = score_frame(canonical, cfg, get_adapter(cfg.method))
    passed = scores[scores["metric"] == "pass_at_1"]
    assert len(passed) == 164 and passed["value"].sum() == 164
    assert code_reasons(canonical) == {"passed": 164}
    nothing = frame(lambda i: "    return None\n")
    scores = score_frame(nothing, cfg, get_adapter(cfg.method))
    assert scores[scores["metric"] == "pass_at_1"]["value"].sum() == 0
    reasons = code_reasons(nothing)
    assert sum(reasons.values()) == 164 and "passed" not in reasons and "AssertionError" in reasons
