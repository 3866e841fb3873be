"""The llama.cpp engine as a pinned input: config checks, the declared fallbacks, and that the
build this machine made (the session fixture, as `dvc repro build_engine` makes it) is the pin."""

from __future__ import annotations

import dataclasses
import platform

import pytest

from evaltrail import config, engine
from evaltrail.config import run_from_conf
from evaltrail.errors import EvaltrailError

from .conftest import ROOT


@pytest.fixture(scope="module")
def pinned():
    return run_from_conf([], conf_dir=ROOT / "conf").engine


def test_this_machines_build_is_the_pinned_engine(pinned, pinned_engine):
    info = engine.info(pinned_engine)
    assert platform.machine() == pinned.arch == "x86_64"
    assert info["sha256"] == pinned.sha256 and info["pinned"] and info["not_pinned_because"] is None
    assert engine.notice(info) is None
    # the profile's flags went into the build, and no AVX-512 or native detection did
    assert "-DGGML_AVX512=OFF" in info["cmake_args"] and "-DGGML_NATIVE=OFF" in info["cmake_args"]
    assert set(info["libraries"]) >= {"libllama.so.0.5.0", "libggml-cpu.so.0.25.3"}
    assert info["compiler"].startswith("zig 0.17.0 cc -target x86_64-linux-gnu.2.28")


def test_the_loaded_library_computes_with_avx2_and_without_avx512(pinned_engine):
    from evaltrail.backends.llama_cpp import cpu_kernels

    kernels = cpu_kernels()
    assert "AVX2 = 1" in kernels and "AVX512" not in kernels
    assert engine.load().__file__.startswith(str(pinned_engine.resolve()))


def test_native_kernels_and_other_architectures_are_declared_identities(pinned, monkeypatch):
    profile, args, why = engine.effective(dataclasses.replace(pinned, kernels="native"))
    assert profile == f"native-{platform.machine()}" and args == engine.NATIVE_ARGS and "native" in why
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    profile, args, why = engine.effective(pinned)
    assert profile == "native-aarch64" and "is for x86_64, this machine is aarch64" in why
    line = engine.notice({"not_pinned_because": why, "sha256": "ab" * 32})
    assert line.startswith("engine: not the pinned llama.cpp build:") and "abababababab" in line


@pytest.mark.parametrize(
    "raw, key",
    [
        (None, "missing"),
        ({"source": {"package": "llama-cpp-python", "version": "0.3.36"}, "cmake_args": []}, "engine.source.sha256"),
        (
            {"source": {"package": "p", "version": "1", "sha256": "0"}, "cmake_args": [], "kernels": "fast"},
            "engine.kernels",
        ),
        ({"source": {"package": "p", "version": "1", "sha256": "0"}, "cmake_args": ["AVX2"]}, "engine.cmake_args"),
    ],
)
def test_a_bad_engine_block_is_one_line_naming_the_key(raw, key):
    with pytest.raises(EvaltrailError, match=key.replace(".", r"\.")) as err:
        config.engine_config(raw)
    assert "\n" not in str(err.value)


def test_a_missing_engine_says_how_to_build_it(tmp_path, monkeypatch):
    monkeypatch.setenv(engine.ENGINE_ENV, str(tmp_path / "nothing"))
    with pytest.raises(EvaltrailError, match=r"no built llama.cpp engine; run `dvc repro build_engine`"):
        engine.locate()
