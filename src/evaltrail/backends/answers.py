"""Answers as artifacts: the request cache's answers exported with their whole key material, and
imported on another machine only where they are that machine's answers too.

A row is imported when its key is cache_key(identity, request), its answer matches its sha256, its
identity is this machine's identity of the model (same weights, llama.cpp build and CPU kernels),
and its answer has a completion's fields. An imported answer is then one the local infer would
have cached itself, so a run split over machines or days gives the bytes of one run."""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..config import RunConfig, model_config, scenario_config
from ..errors import EvaltrailError
from ..hashing import canonical_json
from ..io import read_json, write_parquet
from ..paths import model_info_path, prompts_path
from . import model_identity
from .cache import RequestCache, cache_key, completion_problem
from .infer import _CONTENT, request_contents

# One row per cached answer with its whole key material, JSON canonical.
ANSWERS_SCHEMA = pa.schema(
    [
        ("key", pa.string()),  # the request cache key: cache_key(identity, request)
        ("scenario", pa.string()),
        ("model", pa.string()),  # the (first) cell that sent the request
        ("identity", pa.string()),  # the model identity the answer was computed with
        ("request", pa.string()),  # the request content
        ("answer", pa.string()),  # the cached answer
        ("answer_sha256", pa.string()),  # sha256 of `answer`: the key does not cover it
    ]
)


@dataclass(frozen=True)
class CellExport:
    scenario: str
    """The scenario whose prepared prompts were read."""
    model: str
    """The model whose local identity keyed them."""
    requests: int
    """Distinct requests of the cell (cache keys)."""
    missing: int
    """Of those, how many are not in the cache (not exported)."""


@dataclass(frozen=True)
class ExportResult:
    rows: int
    """Answers written: one per key, so a request several cells send is written once."""
    cells: tuple[CellExport, ...]
    """Every exported cell, in (scenario, model) order."""


@dataclass(frozen=True)
class Refusal:
    reason: str
    """One line: why, for which fields or models, and what to do."""
    rows: int
    """Rows refused for this reason."""


@dataclass(frozen=True)
class ImportResult:
    imported: int
    """Rows newly added to the cache."""
    present: int
    """Rows already cached with the same answer."""
    conflicts: int
    """Rows whose key is cached with another answer: the cached one is kept (first writer wins)."""
    refused: tuple[Refusal, ...]
    """Rows not imported, one entry per reason."""


def local_identity(run: RunConfig, model: str) -> dict:
    """This machine's identity of `model`: its params.yaml config and its fetched model.json."""
    cfg, path = model_config(run, model), model_info_path(model)
    if not path.exists():
        raise EvaltrailError(f"{path}: not found; run `dvc repro fetch_model@{model}` first")
    return model_identity(cfg, read_json(path))


def export_answers(
    run: RunConfig,
    cache: RequestCache,
    out: str | Path,
    scenarios: list[str] | None = None,
    models: list[str] | None = None,
) -> ExportResult:
    """Write the cached answers of every scenario x model cell (default: all of params.yaml) to `out`.

    Reads the prepared prompts, model.json and the cache, never a model: a request that is not
    cached is counted, not computed. Rows are sorted by key, so the same cache gives the same bytes."""
    for name in scenarios or ():
        scenario_config(run, name)  # unknown names fail before any work
    identities = {m: local_identity(run, m) for m in sorted(set(models or run.model))}
    rows: dict[str, dict] = {}
    cells = []
    for scenario in sorted(set(scenarios or run.scenario)):
        path = prompts_path(scenario)
        if not path.exists():
            raise EvaltrailError(f"{path}: not found; run `dvc repro prepare@{scenario}` first")
        contents = request_contents(pd.read_parquet(path, columns=_CONTENT))
        for model, identity in identities.items():
            requests = {cache_key(identity, c): c for c in contents}
            found = cache.serve(requests)  # sound answers only, checked against their request
            cells.append(CellExport(scenario, model, len(requests), len(requests) - len(found)))
            ident = canonical_json(identity)
            for key, answer in found.items():
                if key not in rows:
                    text = canonical_json(answer)
                    rows[key] = {
                        "key": key,
                        "scenario": scenario,
                        "model": model,
                        "identity": ident,
                        "request": canonical_json(requests[key]),
                        "answer": text,
                        "answer_sha256": _sha256(text),
                    }
    if not rows:  # an empty file would publish nothing while looking like answers
        raise EvaltrailError(
            f"{cache.path}: none of the {sum(c.requests for c in cells):,} requests of "
            f"{', '.join(f'{c.scenario} x {c.model}' for c in cells)} is cached there; set EVALTRAIL_CACHE to "
            f"the cache the infer stage used ({out} not written)"
        )
    write_parquet(out, pa.Table.from_pylist([rows[k] for k in sorted(rows)], schema=ANSWERS_SCHEMA))
    return ExportResult(len(rows), tuple(cells))


def read_answers(path: str | Path) -> pa.Table:
    """An exported answers file, checked as a whole (its rows are checked on import)."""
    if not Path(path).is_file():
        raise EvaltrailError(f"{path}: not found")
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise EvaltrailError(f"{path}: not a readable Parquet file ({str(exc).splitlines()[0]})") from None
    if lacking := [n for n in ANSWERS_SCHEMA.names if n not in table.column_names]:
        raise EvaltrailError(f"{path}: no column {lacking[0]!r}; not a file of `evaltrail cache export`")
    try:
        table = table.select(ANSWERS_SCHEMA.names).cast(ANSWERS_SCHEMA)
    except pa.ArrowException as exc:
        raise EvaltrailError(
            f"{path}: columns of the wrong type ({str(exc).splitlines()[0]}); not a file of `evaltrail cache export`"
        ) from None
    if empty := [n for n in ANSWERS_SCHEMA.names if table.column(n).null_count]:
        raise EvaltrailError(f"{path}: column {empty[0]!r} has empty values; not a file of `evaltrail cache export`")
    if len(set(table.column("key").to_pylist())) < table.num_rows:
        raise EvaltrailError(f"{path}: a key appears twice; not a file of `evaltrail cache export`")
    return table


_EDITED = "edited after export ({})"
_OTHER_IDENTITY = (
    "computed by another engine/model identity ({}); import them on a machine with that engine or recompute"
)
_NO_IDENTITY = "no local identity of their model to check them against ({})"
_NOT_A_COMPLETION = "the answer is not a completion ({})"


def import_answers(table: pa.Table, run: RunConfig, cache: RequestCache) -> ImportResult:
    """Add the rows of an answers file that are this machine's answers to the cache; keep every
    cached answer; say why each other row was refused."""

    @functools.cache
    def identity_of(model: str) -> dict | EvaltrailError:
        try:
            return local_identity(run, model)
        except EvaltrailError as exc:
            return exc

    accepted: dict[str, dict] = {}
    requests: dict[str, dict] = {}
    refused: dict[str, Counter] = defaultdict(Counter)  # reason -> its details, by rows
    for row in table.to_pylist():
        try:
            accepted[row["key"]], requests[row["key"]] = _accept(row, identity_of(row["model"]))
        except _Refused as refusal:
            reason, detail = refusal.args
            refused[reason][detail] += 1
    cached = cache.add_new(accepted, requests)
    conflicts = sum(canonical_json(answer) != canonical_json(accepted[k]) for k, answer in cached.items())
    return ImportResult(
        len(accepted) - len(cached),
        len(cached) - conflicts,
        conflicts,
        tuple(
            Refusal(_summary(reason, refused[reason]), refused[reason].total())
            for reason in (_EDITED, _NO_IDENTITY, _OTHER_IDENTITY, _NOT_A_COMPLETION)
            if reason in refused
        ),
    )


class _Refused(Exception):
    """(reason, detail): a row that may not enter the cache."""


def _accept(row: dict, local: dict | EvaltrailError) -> tuple[dict, dict]:
    """The row's answer and request if it may enter the cache here; raises _Refused otherwise."""
    if _sha256(row["answer"]) != row["answer_sha256"]:
        raise _Refused(_EDITED, "the answer does not match its sha256")
    try:
        identity, request, answer = (json.loads(row[c]) for c in ("identity", "request", "answer"))
    except json.JSONDecodeError:
        raise _Refused(_EDITED, "not JSON") from None
    if cache_key(identity, request) != row["key"]:
        raise _Refused(_EDITED, "the key does not match identity + request")
    if isinstance(local, EvaltrailError):
        raise _Refused(_NO_IDENTITY, str(local))
    if identity != local:
        raise _Refused(_OTHER_IDENTITY, f"{row['model']}: {_diff(identity, local)}")
    if problem := completion_problem(answer, request):
        raise _Refused(_NOT_A_COMPLETION, problem)
    return answer, request


def _diff(theirs, ours: dict) -> str:
    """The identity fields that differ, each shown from the word where its two values part
    (`AVX512 = 1` vs `AVX2 = 1`, not a shared prefix of 100 characters)."""
    if not isinstance(theirs, dict):
        return "not a mapping"
    parts = []
    for field in sorted(theirs.keys() | ours.keys()):
        a, b = (canonical_json(d[field]) if field in d else "(none)" for d in (theirs, ours))
        if a == b:
            continue
        start = a.rfind(" ", 0, len(os.path.commonprefix([a, b]))) + 1
        parts.append(f"{field} {_excerpt(a, start)} vs here {_excerpt(b, start)}")
    return ", ".join(parts)


def _excerpt(text: str, start: int, width: int = 32) -> str:
    return ("…" if start else "") + text[start : start + width] + ("…" if len(text) > start + width else "")


def _summary(reason: str, details: Counter) -> str:
    shown = [d for d, _ in details.most_common(3)]
    return reason.format("; ".join(shown) + (f"; {len(details) - 3} more" if len(details) > 3 else ""))


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
