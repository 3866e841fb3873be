"""Stage outputs are the same bytes on every machine: the Parquet writer is pinned like the engine."""

from __future__ import annotations

import pyarrow as pa

from evaltrail.hashing import sha256_file
from evaltrail.io import write_parquet

# sha256 of the file below as the pyarrow pinned in pyproject.toml writes it; other releases
# (26.0.0, 26.0.1 among them) write other bytes for the same table, which changes every md5 in dvc.lock.
PINNED_SHA256 = "eaca151caf728a3b41560acc3a887f61a1add786b9a958e5db29b33049884ab4"


def _write(path):
    table = pa.table({"request_id": ["b1", "a2", "b1"], "logprob": [-0.5, -1.25, None], "n": [3, 1, 2]})
    write_parquet(path, table, {"evaltrail": "test"})
    return sha256_file(path)


def test_parquet_bytes_are_those_of_the_pinned_writer(tmp_path):
    first = _write(tmp_path / "a.parquet")
    assert _write(tmp_path / "b.parquet") == first
    assert first == PINNED_SHA256, (
        f"pyarrow {pa.__version__} writes other Parquet bytes than the version pinned in pyproject.toml: "
        "`pip install -e .` installs the pin"
    )
