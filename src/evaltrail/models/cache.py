"""The request cache: SQLite in WAL mode, one committed row per finished request.

Keyed by sha256(model identity, request content), never by the request alone, so two models (or
two llama.cpp versions) never share an answer. An interrupted `infer` loses at most the request
in flight; the re-run serves everything finished from here.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from ..hashing import stable_id


def cache_key(identity: dict, request_content: dict) -> str:
    return stable_id({"model": identity, "request": request_content}, length=64)


class RequestCache:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(path, timeout=60, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("CREATE TABLE IF NOT EXISTS completions (key TEXT PRIMARY KEY, value TEXT NOT NULL)")

    def get_many(self, keys: list[str]) -> dict[str, dict]:
        found: dict[str, dict] = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            q = f"SELECT key, value FROM completions WHERE key IN ({','.join('?' * len(chunk))})"
            found.update({k: json.loads(v) for k, v in self.conn.execute(q, chunk)})
        return found

    def put(self, key: str, value: dict) -> None:
        # autocommit mode: each INSERT is its own atomic transaction
        self.conn.execute("INSERT OR REPLACE INTO completions (key, value) VALUES (?, ?)",
                          (key, json.dumps(value)))

    def add_new(self, answers: dict[str, dict]) -> dict[str, dict]:
        """Insert the answers whose key is not cached yet, in one transaction; return the cached
        answers of the other keys, which are kept (first writer wins)."""
        self.conn.execute("BEGIN IMMEDIATE")  # no other writer between the lookup and the inserts
        try:
            cached = self.get_many(sorted(answers))
            self.conn.executemany("INSERT INTO completions (key, value) VALUES (?, ?)",
                                  [(k, json.dumps(v)) for k, v in answers.items() if k not in cached])
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")
        return cached

    def close(self) -> None:
        self.conn.close()
