"""prepare@<scenario>: verified raw files -> instances -> sampled, adapted requests (Parquet)."""

from evaltrail.adapters import get_adapter
from evaltrail.config import load_params, scenario_config
from evaltrail.io import write_parquet
from evaltrail.paths import prompts_path, raw_dir
from evaltrail.scenarios import get_scenario
from evaltrail.schema import prompts_table
from evaltrail.sources import check_dir
from evaltrail.stage import run_stage


def main(scenario: str) -> None:
    run = load_params()
    cfg = scenario_config(run, scenario)
    loader = get_scenario(scenario)
    loader.check(cfg)
    adapter = get_adapter(cfg.method, f"params.yaml: scenario.{scenario}.method")
    check_dir(raw_dir(scenario))
    pairs = adapter.build(cfg, run, loader.load(cfg, raw_dir(scenario)))
    write_parquet(prompts_path(scenario), prompts_table(pairs))
    print(f"prepare {scenario}: {len({i.instance_id for i, _ in pairs})} instances, {len(pairs)} requests")


if __name__ == "__main__":
    run_stage(main, "prepare.py <scenario>")
