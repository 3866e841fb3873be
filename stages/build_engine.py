"""build_engine: the llama.cpp build every embedded model computes with, pinned like data.

Compiles the pinned llama-cpp-python sdist's llama.cpp with the kernel profile in params.yaml
(once per machine: builds are cached in $EVALTRAIL_ENGINE_CACHE, default ~/.cache/evaltrail-engine)
into engine/build; its identity engine/engine.json (libraries' sha256, profile, compiler) is what
every infer stage depends on."""

import sys

from evaltrail.engine import build, notice
from evaltrail.errors import EvaltrailError
from evaltrail.paths import ENGINE_JSON, engine_cache_dir, engine_dir
from evaltrail.stage import run_stage
from evaltrail.stage_params import load_stage_params


def main() -> None:
    run = load_stage_params("build_engine")
    if run.engine is None:
        raise EvaltrailError("params.yaml: engine: missing; it pins the llama.cpp build (recompose with `dvc exp run`)")
    info = build(run.engine, engine_cache_dir(), engine_dir(), ENGINE_JSON)
    print(
        f"build_engine: llama-cpp-python {info['llama_cpp_python']}, profile {info['profile']}, "
        f"identity {info['sha256'][:12]} ({'pinned' if info['pinned'] else 'not pinned'})"
    )
    if line := notice(info):
        print(line, file=sys.stderr)


if __name__ == "__main__":
    run_stage(main, "build_engine.py")
