"""score@<scenario>-<model>: per-instance metric values (Parquet) and their summary with 95% CIs (JSON)."""

import sys

from evaltrail.config import scenario_config
from evaltrail.io import write_json, write_parquet
from evaltrail.metrics import check_metrics
from evaltrail.metrics.scoring import score_cell, scores_table
from evaltrail.paths import scores_path, summary_path
from evaltrail.stage import run_stage
from evaltrail.stage_params import load_stage_params


def main(scenario: str, model: str) -> None:
    run = load_stage_params("score", f"{scenario}-{model}")
    cfg = scenario_config(run, scenario)
    check_metrics(cfg.metrics, f"params.yaml: scenario.{scenario}.metrics")
    scores, summary = score_cell(run, scenario, model)
    write_parquet(scores_path(scenario, model), scores_table(scores))
    write_json(summary_path(scenario, model), summary)
    for name, st in summary["metrics"].items():
        if st.get("warning"):
            print(f"warning: {scenario} x {model}: {name}: {st['warning']}", file=sys.stderr)
        if st["mean"] is not None and (name in cfg.metrics or name.endswith(("/robustness", "/fairness"))):
            print(
                f"score {scenario} x {model}: {name}{' (main)' if name == cfg.main_metric else ''} = "
                f"{st['mean']:.4f} [{st['ci_low']:.4f}, {st['ci_high']:.4f}] (n={st['n']})"
            )


if __name__ == "__main__":
    run_stage(main, "score.py <scenario> <model>")
