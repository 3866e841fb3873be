"""Reading raw rows with file:line error reporting; malformed rows skip only when the config allows.

A loader converts each raw row with a small function; any KeyError/ValueError/TypeError/IndexError
it raises marks the row malformed. Up to `max_malformed` such rows are skipped with a warning
naming file and line (and counted in `SKIPPED`, which prepare reports); one more fails the stage.
"""

from __future__ import annotations

import csv
import gzip
import json
import sys
from pathlib import Path
from typing import Callable, Iterable, Iterator

from ..config import ScenarioConfig
from ..errors import EvaltrailError
from ..schema import Instance

SKIPPED: dict[str, int] = {}
"""Malformed rows skipped by the latest conversion of each raw file (prepare reports it)."""

MALFORMED = (KeyError, ValueError, TypeError, IndexError, AttributeError)


def _require(path: Path) -> Path:
    if not path.is_file():
        raise EvaltrailError(f"{path}: missing raw file; run `dvc repro` so fetch materializes it")
    return path


def jsonl_rows(path: Path) -> Iterator[tuple[int, object]]:
    """(line number, parsed JSON or the exception) for each non-blank line (gzip when *.gz)."""
    opener = gzip.open if Path(path).suffix == ".gz" else open
    with opener(_require(path), "rt", encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield no, json.loads(line)
                except json.JSONDecodeError as exc:
                    yield no, exc


def tsv_rows(path: Path) -> Iterator[tuple[int, object]]:
    """(line number, row dict keyed by the header) for a tab-separated file."""
    with open(_require(path), encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        for row in reader:
            yield reader.line_num, row


def convert(
    cfg: ScenarioConfig,
    path: Path,
    rows: Iterable[tuple[int, object]],
    fn: Callable[[object], Instance | list[Instance] | None],
) -> list[Instance]:
    """Apply `fn` to each (line, row); None from fn means "not an instance" (e.g. a header row)."""
    out: list[Instance] = []
    skipped = 0
    for no, row in rows:
        try:
            if isinstance(row, Exception):
                raise ValueError(str(row))
            made = fn(row)
        except MALFORMED as exc:
            if skipped >= cfg.max_malformed:
                raise EvaltrailError(
                    f"{path}:{no}: malformed row ({type(exc).__name__}: {exc}); "
                    f"fix the file or allow skips with scenario.{cfg.name}.max_malformed"
                ) from None
            skipped += 1
            print(f"warning: {path}:{no}: skipped malformed row ({type(exc).__name__}: {exc})", file=sys.stderr)
            continue
        if made is None:
            continue
        out.extend(made if isinstance(made, list) else [made])
    SKIPPED[str(path)] = skipped
    return out
