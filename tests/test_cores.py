"""Core reservation: a process never gets cores another evaltrail process holds, and frees them."""

from __future__ import annotations

import subprocess
import sys

from evaltrail import cores

PROBE = (
    "import sys; from pathlib import Path; from evaltrail import cores; "
    "print(cores.Reservation(None, Path(sys.argv[1])).threads)"
)


def _threads_elsewhere(lock_dir) -> int:
    out = subprocess.run([sys.executable, "-c", PROBE, str(lock_dir)], capture_output=True, text=True, check=True)
    return int(out.stdout)


def test_held_cores_are_not_given_to_another_process_and_come_back(tmp_path):
    n = cores.machine_cores()
    first = cores.Reservation(None, tmp_path)
    second = cores.Reservation(None, tmp_path)  # the same process: shares the reservation
    assert first.threads == second.threads == n
    assert _threads_elsewhere(tmp_path) == 1  # nothing free: one thread, no waiting
    first.release()
    assert _threads_elsewhere(tmp_path) == 1  # still held by `second`
    second.release()
    assert _threads_elsewhere(tmp_path) == n


def test_a_model_asking_for_fewer_threads_leaves_the_rest(tmp_path):
    n = cores.machine_cores()
    one = cores.Reservation(1, tmp_path)
    try:
        assert one.threads == 1
        assert _threads_elsewhere(tmp_path) == max(1, n - 1)
    finally:
        one.release()
