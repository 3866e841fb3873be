"""configure: validate params.yaml whole and write each stage's slice of it (evaltrail.stage_params).

The only stage that reads params.yaml; every other stage depends on its own slice file.
"""

from evaltrail.config import PARAMS_FILE, parse_params, read_params
from evaltrail.io import atomic_dir
from evaltrail.paths import PARAMS_SLICES
from evaltrail.stage import run_stage
from evaltrail.stage_params import write_slices


def main() -> None:
    raw = read_params()
    parse_params(raw)  # every check on the whole config, before anything is written
    with atomic_dir(PARAMS_SLICES) as staging:
        n = write_slices(raw, staging)
    print(f"configure: {n} stage slices of {PARAMS_FILE} -> {PARAMS_SLICES}/")


if __name__ == "__main__":
    run_stage(main, "configure.py")
