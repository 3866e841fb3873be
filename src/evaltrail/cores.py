"""How many threads an embedded model may run: the machine's cores, shared among evaltrail processes.

llama.cpp's threads wait for each other at every step, so two 2-thread stages on 2 cores run far
slower than one after the other (measured 0.32 of an idle machine's speed). Each infer stage,
`dvc queue` worker or local run therefore reserves cores before it loads a model: one lock file
per core under the evaltrail cache, held (flock) for the life of the process, so the kernel frees
them when it ends however it ends. A process takes every free core (or the model's `n_threads`
if fewer), and runs one thread when none is free. Ray workers run inside Ray's own CPU accounting
and do not use this. The numbers do not depend on the thread count (tests/test_packing.py).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

_held: list = []


def machine_cores() -> int:
    """Cores this process may run on (its CPU affinity, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def reserve(want: int | None, lock_dir: Path) -> int:
    """Hold up to `want` free cores (None: all free ones) for this process; return how many.

    Idempotent within a process: a second call returns what the first one holds."""
    if _held:
        return len(_held)
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
    # Every core taken: run one thread without waiting (a process that waited could be the child
    # of the one holding the cores, as when a test runs `dvc exp run`).
    return len(_held) or 1


def release() -> None:
    while _held:
        _held.pop().close()
