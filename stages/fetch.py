"""fetch@<scenario>: materialize the scenario's pinned source files and verify each sha256."""

from evaltrail.config import scenario_config
from evaltrail.metrics import check_metrics, word_lists
from evaltrail.paths import cache_dir, raw_dir
from evaltrail.scenarios import loader_of, pinned_files
from evaltrail.sources import fetch_dir
from evaltrail.stage import run_stage
from evaltrail.stage_params import load_stage_params


def main(scenario: str) -> None:
    run = load_stage_params("fetch", scenario)
    cfg = scenario_config(run, scenario)
    loader = loader_of(cfg)
    loader.check(cfg)
    check_metrics(cfg.metrics, f"params.yaml: scenario.{scenario}.metrics")  # before any download
    records = fetch_dir(
        pinned_files(cfg, run.resources, word_lists(cfg.metrics)),
        raw_dir(scenario),
        cache_dir(),
        f"params.yaml: scenario.{scenario}.sources",
    )
    print(f"fetch {scenario}: {len(records)} file(s), {sum(r['bytes'] for r in records):,} bytes verified")


if __name__ == "__main__":
    run_stage(main, "fetch.py <scenario>")
