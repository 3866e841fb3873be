"""The request cache: SQLite in WAL mode, one committed row per finished request.

Keyed by sha256(model identity, request content), never by the request alone, so two models (or
two llama.cpp versions) never share an answer. An interrupted `infer` loses at most the request
in flight; the re-run serves everything finished from here.

The cache serves only what it can check. A row is sound when its answer is a completion of its
request's kind (`completion_problem`) and its checksum, sha256 of key and stored value written with
the row, still matches; an unsound row is not served (the caller recomputes it, with one warning
naming this file). Rows without a checksum are legacy rows: those written before checksums
existed, and those an older evaltrail writes into a database this code has opened (its INSERTs
name the key and value columns only, so the checksum stays NULL). The checksum column is added the
first time this code opens an old database (ALTER TABLE ADD COLUMN: a schema change, no rewrite),
and every open adopts the legacy rows that pass the schema check by writing their checksum (a
partial index finds them without a scan), so an edit made after that is caught; an edit made to
a legacy row before it was adopted cannot be told from the original. Older code keeps reading and
writing such a database unchanged.

First writer wins: an answer is stored only where no sound one is, and the writer goes on with the
stored one, so two runs sharing a cache commit the same completions.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pyarrow as pa

from ..errors import EvaltrailError
from ..hashing import stable_id
from ..schema import COMPLETIONS_SCHEMA

_TABLE = "CREATE TABLE IF NOT EXISTS completions (key TEXT PRIMARY KEY, value TEXT NOT NULL, checksum TEXT)"
_CORRUPT = ("SQLITE_CORRUPT", "SQLITE_NOTADB")


def cache_key(identity: dict, request_content: dict) -> str:
    return stable_id({"model": identity, "request": request_content}, length=64)


def checksum(key: str, value: str) -> str:
    """sha256 of a row's key and stored value: an edited answer, or one moved to another key, fails it."""
    return hashlib.sha256(f"{key}\n{value}".encode()).hexdigest()


class RequestCache:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():
            _create(self.path)
        elif self.path.stat().st_size == 0:  # a cache this code made is never empty (header + table)
            raise _unreadable(self.path, "a 0-byte file")
        self.conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        try:
            with self._guard():
                _setup(self.conn)
        except BaseException:
            self.conn.close()
            raise

    @contextlib.contextmanager
    def _guard(self):
        """A damaged file (bad header, truncated) as one line naming it and the fix."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            if getattr(exc, "sqlite_errorname", None) not in _CORRUPT:
                raise
            raise _unreadable(self.path, str(exc)) from None

    def _rows(self, keys: list[str]):
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            yield from self.conn.execute(
                f"SELECT key, value, checksum FROM completions WHERE key IN ({','.join('?' * len(chunk))})", chunk
            )

    def _read(self, requests: dict[str, dict | None]) -> tuple[dict[str, dict], dict[str, str]]:
        """The sound answers of the cached keys among `requests` (key -> request content, or None to
        check the fields only), and why each other cached row is unsound."""
        found, problems = {}, {}
        with self._guard():
            for key, value, digest in self._rows(sorted(requests)):
                answer, problem = _sound(key, value, digest, requests[key])
                if problem:
                    problems[key] = problem
                else:
                    found[key] = answer
        return found, problems

    def serve(self, requests: dict[str, dict | None]) -> dict[str, dict]:
        """The sound cached answers of `requests` (key -> request content); the unsound rows, left
        for the caller to recompute, are announced in one warning line."""
        found, problems = self._read(requests)
        if problems:
            reasons = "; ".join(f"{n} {why}" for why, n in Counter(problems.values()).most_common(3))
            print(
                f"warning: {self.path}: {len(problems)} cached answer(s) failed their check ({reasons}); "
                f"not served (infer recomputes them)",
                file=sys.stderr,
            )
        return found

    def get_many(self, keys: list[str]) -> dict[str, dict]:
        """The sound cached answers of `keys` (their fields checked, not their request kind)."""
        return self.serve(dict.fromkeys(keys))

    def add_new(self, answers: dict[str, dict], requests: dict[str, dict] | None = None) -> dict[str, dict]:
        """Store the answers whose key has no sound answer yet, in one transaction; return the sound
        answers already cached for the other keys, which are kept (first writer wins). An unsound
        row is replaced (OR REPLACE: the write lock is held since it was read)."""
        requests = {k: (requests or {}).get(k) for k in answers}
        for key, answer in answers.items():
            if problem := completion_problem(answer, requests[key]):  # a backend's bug: never cached
                raise EvaltrailError(f"{self.path}: an answer to store is not a completion ({problem}); not cached")
        with self._guard(), _transaction(self.conn):
            cached, _ = self._read(requests)
            rows = [
                (key, value, checksum(key, value))
                for key, value in ((k, json.dumps(a)) for k, a in answers.items() if k not in cached)
            ]
            self.conn.executemany("INSERT OR REPLACE INTO completions (key, value, checksum) VALUES (?, ?, ?)", rows)
        return cached

    def put(self, key: str, answer: dict, request: dict | None = None) -> dict:
        """Store `answer` unless a sound one is cached already; return the answer now stored, which
        the caller must use (another run may have stored its own first)."""
        return self.add_new({key: answer}, {key: request}).get(key, answer)

    def close(self) -> None:
        self.conn.close()


def _create(path: Path) -> None:
    """A new cache, made whole under a temporary name and linked into place: a process killed while
    creating it leaves no empty file behind, and of two creating at once the first one's is kept."""
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".new", dir=path.parent)
    os.close(fd)  # an empty file: SQLite makes it a database
    tmp = Path(name)
    with contextlib.closing(sqlite3.connect(tmp, isolation_level=None)) as conn:
        _setup(conn)  # closing the last connection checkpoints the WAL into the file
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    except OSError:  # a file system without hard links: a plain rename, where nothing is yet
        if not path.exists():
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _setup(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(_TABLE)
    if "checksum" not in _columns(conn):  # a database written by older code: add the column, once
        with _transaction(conn):
            if "checksum" not in _columns(conn):  # another process may have added it meanwhile
                conn.execute("ALTER TABLE completions ADD COLUMN checksum TEXT")
    conn.execute("CREATE INDEX IF NOT EXISTS legacy_rows ON completions (key) WHERE checksum IS NULL")
    _adopt(conn)


def _adopt(conn: sqlite3.Connection) -> None:
    """Give each legacy row that passes the schema check its checksum (the rest stay unsound and
    are recomputed when requested)."""
    legacy = conn.execute("SELECT key, value FROM completions WHERE checksum IS NULL").fetchall()
    rows = [(checksum(k, v), k, v) for k, v in legacy if _sound(k, v, None, None)[1] is None]
    if rows:
        with _transaction(conn):  # the value must still be the one checked
            conn.executemany(
                "UPDATE completions SET checksum = ? WHERE key = ? AND value = ? AND checksum IS NULL", rows
            )


@contextlib.contextmanager
def _transaction(conn: sqlite3.Connection):
    conn.execute("BEGIN IMMEDIATE")  # no other writer between a lookup and the writes it decides
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _columns(conn: sqlite3.Connection) -> set[str]:
    return {row[1] for row in conn.execute("PRAGMA table_info(completions)")}


def _unreadable(path: Path, detail: str) -> EvaltrailError:
    return EvaltrailError(
        f"{path}: not a readable request cache ({detail}); move it away (mv {path} {path}.broken) "
        f"and re-run to recompute its answers, or rebuild it with `evaltrail cache import` of an "
        f"`evaltrail cache export` file"
    )


def _sound(key: str, value: str, digest: str | None, request: dict | None) -> tuple[dict | None, str | None]:
    """(answer, None) for a sound row, (None, why not) otherwise; a NULL checksum is a legacy row."""
    if digest is not None and digest != checksum(key, value):
        return None, "edited since written (checksum mismatch)"
    try:
        answer = json.loads(value)
    except ValueError:
        return None, "not JSON"
    problem = completion_problem(answer, request)
    return (None, problem) if problem else (answer, None)


def _checker(typ: pa.DataType):
    """Whether a JSON value fits an Arrow column type (bool is not a number here), as a function
    made once per column: every cached row is checked."""
    if pa.types.is_list(typ):
        item = _checker(typ.value_type)
        return lambda v: isinstance(v, list) and all(map(item, v))
    if pa.types.is_boolean(typ):
        return lambda v: type(v) is bool
    if pa.types.is_integer(typ):
        return lambda v: isinstance(v, int) and type(v) is not bool
    if pa.types.is_floating(typ):
        return lambda v: isinstance(v, (int, float)) and type(v) is not bool
    return lambda v: isinstance(v, str)


# What run_requests copies from an answer into a completion: every column but the two it adds.
_FIELDS = {
    f.name: (f.type, _checker(f.type)) for f in COMPLETIONS_SCHEMA if f.name not in ("request_id", "model_sha256")
}
_OPTIONAL = {"rendered_prompt"}  # rolling loglikelihood answers have none
_NULLABLE = {"text", "is_greedy", "rendered_prompt"}  # no generation, no greedy check, no chat template


def completion_problem(answer, request) -> str | None:
    """Why `answer` is not an answer a backend returns for `request` (its content; None: any kind), or None."""
    if not isinstance(answer, dict):
        return "not a JSON object"
    if unknown := sorted(set(answer) - set(_FIELDS)):
        return f"unknown field {unknown[0]!r}"
    if lacking := [f for f in _FIELDS if f not in answer and f not in _OPTIONAL]:
        return f"no {lacking[0]!r}"
    for name, value in answer.items():
        typ, fits = _FIELDS[name]
        if value is None and name not in _NULLABLE:
            return f"{name!r} is null"
        if value is not None and not fits(value):
            return f"{name!r} is not {typ}"
    if isinstance(request, dict) and request.get("method") == "generate" and answer["text"] is None:
        return "a generation without text"
    return None
