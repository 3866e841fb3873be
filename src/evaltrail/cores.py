"""How many threads an embedded model may run: the machine's cores, shared among evaltrail processes.

llama.cpp's threads wait for each other at every step, so two 2-thread stages on 2 cores run far
slower than one after the other. Before it loads a model, a process reserves cores: one lock
file per core in the machine's temporary directory, held (flock) while any of its embedded
models is alive, so the kernel frees them when the process ends however it ends. A process takes
every free core (or the model's `n_threads` if fewer), and runs one thread when none is free
(waiting could deadlock a child whose parent holds the cores, as when a test runs `dvc exp run`).
Models loaded together in one process share its reservation. Ray workers run inside Ray's own
CPU accounting. The numbers do not depend on the thread count (tests/test_packing.py).
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path

LOCK_DIR = Path(tempfile.gettempdir()) / "evaltrail-cores"
"""Machine-wide: cores are the machine's, whatever repository or cache a process uses."""

_held: list = []
_users = 0


def machine_cores() -> int:
    """Cores this process may run on (its CPU affinity, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class Reservation:
    """Cores held for one model; `threads` is how many it may run. Release when done (or let
    the object go): the cores are freed when the process's last reservation is released."""

    def __init__(self, want: int | None, lock_dir: Path = LOCK_DIR):
        global _users
        if not _users:
            _take(want, lock_dir)
        _users += 1
        self.threads = min(len(_held), want or len(_held)) or 1  # no free core: one thread
        self._live = True

    def release(self) -> None:
        global _users
        if self._live:
            self._live = False
            _users -= 1
            if not _users:
                while _held:
                    _held.pop().close()

    def __del__(self):
        self.release()


def _take(want: int | None, lock_dir: Path) -> None:
    lock_dir.mkdir(parents=True, exist_ok=True)
    n = machine_cores()
    want = min(want or n, n)
    for i in range(n):
        if len(_held) == want:
            break
        f = open(lock_dir / f"core-{i}.lock", "a")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            continue
        _held.append(f)
