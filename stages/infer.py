"""infer@<scenario>-<model>: run every request through the model; the request cache makes it resumable."""

import os
import resource
import sys
import time

import pandas as pd

from evaltrail.config import load_params, model_config, scenario_config
from evaltrail.io import read_json, write_json, write_parquet
from evaltrail.models import model_identity, open_model
from evaltrail.models.cache import RequestCache
from evaltrail.models.distributed import ADDRESS_ENV, RayShards
from evaltrail.models.infer import run_requests
from evaltrail.models.weights import verified_weights
from evaltrail.paths import (cache_dir, completions_path, infer_stats_path, model_dir, model_info_path, model_path,
                            prompts_path)
from evaltrail.stage import run_stage


def main(scenario: str, model: str) -> None:
    start = time.perf_counter()
    run = load_params()
    scenario_config(run, scenario)
    cfg = model_config(run, model)
    info = read_json(model_info_path(model))
    prompts = pd.read_parquet(prompts_path(scenario))
    cache = RequestCache(cache_dir() / "requests.sqlite")

    def load():
        if os.environ.get(ADDRESS_ENV) and cfg.backend == "llama_cpp":  # shard over a Ray cluster: same answers
            return RayShards(cfg, model_path(model), verified_weights(cfg, model_path(model), info),
                             os.environ[ADDRESS_ENV])
        return open_model(cfg, model_dir(model), info)

    identity = model_identity(cfg, info)
    table, computed = run_requests(prompts, identity, cache, load, f"infer {scenario} x {model}")
    write_parquet(completions_path(scenario, model), table)
    # The stage's own cost (efficiency): differs run to run, so it lives beside the completions, not in them.
    # So do the CPU kernels every answer was computed with (part of the cache key): results differ by them.
    kernels = {"cpu_kernels": identity["cpu_kernels"]} if "cpu_kernels" in identity else {}
    write_json(infer_stats_path(scenario, model), {
        "wall_s": round(time.perf_counter() - start, 3), "requests": table.num_rows, "computed": computed,
        "from_cache": table.num_rows - computed,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1), **kernels})
    print(f"infer {scenario} x {model}: {table.num_rows} requests ({table.num_rows - computed} from cache)")
    cut = [n for n in table.column("truncated_tokens").to_pylist() if n]
    if cut:
        print(f"warning: {len(cut)} prompt(s) exceeded model.{model}.n_ctx={cfg.n_ctx} and lost their leftmost "
              f"{min(cut)}-{max(cut)} tokens (instructions / oldest in-context examples)", file=sys.stderr)


if __name__ == "__main__":
    run_stage(main, "infer.py <scenario> <model>")
