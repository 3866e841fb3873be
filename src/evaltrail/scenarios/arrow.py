"""Read Hugging Face `datasets` Arrow files (Arrow IPC streams) as lists of row dicts."""

from __future__ import annotations

from pathlib import Path

import pyarrow.ipc as ipc

from ..errors import EvaltrailError


def read_rows(path: Path) -> list[dict]:
    if not path.is_file():
        raise EvaltrailError(f"{path}: missing raw file; run `dvc repro` so fetch materializes it")
    try:
        with open(path, "rb") as f:
            return ipc.open_stream(f).read_all().to_pylist()
    except (OSError, ValueError) as exc:  # pyarrow raises ArrowInvalid (a ValueError) on a bad stream
        raise EvaltrailError(f"{path}: not a readable Arrow IPC stream ({exc}); re-fetch it") from None


def arrow_rows(path: Path):
    """(row number, row dict) pairs, for `rows.convert` (Arrow has no lines; rows count from 1)."""
    return enumerate(read_rows(path), 1)
