"""prepare@<scenario>: verified raw files -> instances (+ perturbed variants) -> sampled, adapted requests (Parquet)."""

from collections import Counter

from evaltrail import resources
from evaltrail.adapters import get_adapter
from evaltrail.adapters.sampling import repeated_rows
from evaltrail.config import scenario_config
from evaltrail.io import write_json, write_parquet
from evaltrail.paths import prepare_report_path, prompts_path, raw_dir
from evaltrail.scenarios import loader_of, rows
from evaltrail.schema import prompts_table
from evaltrail.sources import check_dir
from evaltrail.stage import run_stage
from evaltrail.stage_params import load_stage_params


def main(scenario: str) -> None:
    run = load_stage_params("prepare", scenario)
    cfg = scenario_config(run, scenario)
    loader = loader_of(cfg)
    loader.check(cfg)
    adapter = get_adapter(cfg.method, f"params.yaml: scenario.{scenario}.method")
    check_dir(raw_dir(scenario))
    rows.SKIPPED.clear()
    splits = loader.load(cfg, raw_dir(scenario))
    pairs = adapter.build(
        cfg, run, splits, resources.load_perturbation_resources(run.resources, cfg, raw_dir(scenario))
    )
    report = {
        "scenario": scenario,
        "loaded": {s: len(v) for s, v in sorted(splits.items())},
        **({"repeated_rows": repeated} if (repeated := repeated_rows(splits)) else {}),
        "skipped_malformed_rows": {str(k): v for k, v in sorted(rows.SKIPPED.items()) if v},
        "instances": len({i.instance_id for i, _ in pairs}),
        "requests": len(pairs),
        "variants": dict(
            sorted(
                Counter(
                    i.perturbation for i, _ in {p[0].instance_id: p for p in pairs}.values() if i.perturbation
                ).items()
            )
        ),
    }
    write_parquet(prompts_path(scenario), prompts_table(pairs))
    write_json(prepare_report_path(scenario), report)
    print(
        f"prepare {scenario}: {report['instances']} instances, {report['requests']} requests"
        + (
            f", {sum(report['skipped_malformed_rows'].values())} malformed rows skipped"
            if report["skipped_malformed_rows"]
            else ""
        )
    )


if __name__ == "__main__":
    run_stage(main, "prepare.py <scenario>")
