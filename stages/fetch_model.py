"""fetch_model@<model>: assemble the model's weights under models/ and verify the sha256."""

from evaltrail.config import load_params, model_config
from evaltrail.models.weights import materialize
from evaltrail.paths import cache_dir, model_info_path, model_path
from evaltrail.stage import run_stage


def main(model: str) -> None:
    cfg = model_config(load_params(), model)
    info = materialize(cfg, model_path(model), model_info_path(model), cache_dir())
    print(f"fetch_model {model}: {info['bytes']:,} bytes, sha256 {info['sha256']}")


if __name__ == "__main__":
    run_stage(main, "fetch_model.py <model>")
