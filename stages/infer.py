"""infer@<scenario>-<model>: run every request through the model; the request cache makes it resumable."""

import os
import resource
import sys
import time

import pandas as pd

from evaltrail import engine
from evaltrail.backends import model_identity, open_model
from evaltrail.backends.cache import RequestCache
from evaltrail.backends.distributed import ADDRESS_ENV, RayShards
from evaltrail.backends.infer import run_requests
from evaltrail.backends.llama_cpp import cpu_kernels
from evaltrail.backends.weights import verified_weights
from evaltrail.config import model_config
from evaltrail.costs import cpu_name, measure
from evaltrail.hashing import canonical_json
from evaltrail.io import read_json, write_json, write_parquet
from evaltrail.paths import (
    completions_path,
    infer_stats_path,
    model_dir,
    model_info_path,
    model_path,
    prompts_path,
    request_cache_path,
)
from evaltrail.schema import IDENTITY_KEY, STORED_COMPLETIONS_SCHEMA
from evaltrail.stage import run_stage
from evaltrail.stage_params import load_stage_params


def main(scenario: str, model: str) -> None:
    start = time.perf_counter()
    run = load_stage_params("infer", f"{scenario}-{model}")
    cfg = model_config(run, model)
    info = read_json(model_info_path(model))
    prompts = pd.read_parquet(prompts_path(scenario))
    cache = RequestCache(request_cache_path())

    def load():
        if os.environ.get(ADDRESS_ENV) and cfg.backend == "llama_cpp":  # shard over a Ray cluster: same answers
            return RayShards(
                cfg, model_path(model), verified_weights(cfg, model_path(model), info), os.environ[ADDRESS_ENV]
            )
        return open_model(cfg, model_dir(model), info)

    identity = model_identity(cfg, info)
    if cfg.backend == "llama_cpp" and (line := engine.notice(engine.info())):
        print(line, file=sys.stderr)
    table, computed = run_requests(prompts, identity, cache, load, f"infer {scenario} x {model}")
    # The answers alone, with the identity they were computed under: what pinned inputs determine.
    stored = table.select(STORED_COMPLETIONS_SCHEMA.names).cast(STORED_COMPLETIONS_SCHEMA)
    write_parquet(completions_path(scenario, model), stored, {IDENTITY_KEY: canonical_json(identity)})
    # What measures the machine and this run lives apart (results/costs, not a DVC output): seconds,
    # KV reuse, throughput, memory, and the kernels llama.cpp reports (evaltrail.costs).
    seen = {"cpu": cpu_name(), **({"cpu_kernels": cpu_kernels()} if cfg.backend == "llama_cpp" else {})}
    write_json(
        infer_stats_path(scenario, model),
        {
            "wall_s": round(time.perf_counter() - start, 3),
            "requests": table.num_rows,
            "computed": computed,
            "from_cache": table.num_rows - computed,
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            **seen,
            "identity": identity,
            "measured": measure(table.to_pandas()),
        },
    )
    print(f"infer {scenario} x {model}: {table.num_rows} requests ({table.num_rows - computed} from cache)")
    cut = [n for n in table.column("truncated_tokens").to_pylist() if n]
    if cut:
        print(
            f"warning: {len(cut)} prompt(s) exceeded model.{model}.n_ctx={cfg.n_ctx} and lost their leftmost "
            f"{min(cut)}-{max(cut)} tokens (instructions / oldest in-context examples)",
            file=sys.stderr,
        )


if __name__ == "__main__":
    run_stage(main, "infer.py <scenario> <model>")
