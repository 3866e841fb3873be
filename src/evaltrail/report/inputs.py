"""Read the report's inputs; a missing or unreadable file fails with its path and the stage to run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from ..errors import EvaltrailError


def _missing(path: Path, fix: str) -> EvaltrailError:
    return EvaltrailError(f"{path}: missing; {fix}")


def read_json_input(path: str | Path, fix: str) -> Any:
    path = Path(path)
    if not path.is_file():
        raise _missing(path, fix)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise EvaltrailError(f"{path}: not valid JSON ({exc})" + (f"; {fix}" if fix else "")) from None


def read_parquet_input(path: str | Path, fix: str) -> list[dict]:
    """The file's rows as dicts (nulls as None, ints as ints: no NaN to guard against)."""
    path = Path(path)
    if not path.is_file():
        raise _missing(path, fix)
    try:
        return pq.read_table(path).to_pylist()
    except Exception as exc:  # pyarrow raises several types for a corrupt file
        raise EvaltrailError(f"{path}: not a readable Parquet file ({exc}); {fix}") from None


def read_optional_csv(path: str | Path, columns: list[str]) -> pd.DataFrame | None:
    """An optional table (a plot's data): None when absent, an error naming a missing column."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        frame = pd.read_csv(path, keep_default_na=True)
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise EvaltrailError(f"{path}: not a readable CSV ({exc})") from None
    absent = [c for c in columns if c not in frame.columns]
    if absent:
        raise EvaltrailError(f"{path}: missing column {absent[0]!r}; expected {', '.join(columns)}")
    return frame


def read_optional_json(path: str | Path) -> Any:
    path = Path(path)
    return read_json_input(path, "") if path.is_file() else None
