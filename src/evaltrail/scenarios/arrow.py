"""Read Hugging Face `datasets` Arrow files (Arrow IPC streams) as lists of row dicts."""

from __future__ import annotations

from pathlib import Path

import pyarrow.ipc as ipc

from ..errors import EvaltrailError


def read_rows(path: Path) -> list[dict]:
    if not path.is_file():
        raise EvaltrailError(f"{path}: missing raw file; run `dvc repro` so fetch materializes it")
    with open(path, "rb") as f:
        return ipc.open_stream(f).read_all().to_pylist()
