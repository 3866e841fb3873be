"""score@<scenario>-<model>: per-instance metric values (Parquet) and their summary with 95% CIs (JSON)."""

import pandas as pd

from evaltrail.adapters import get_adapter
from evaltrail.config import load_params, model_config, scenario_config
from evaltrail.io import write_json, write_parquet
from evaltrail.metrics.scoring import join, score_frame, scores_table, summarize
from evaltrail.paths import completions_path, prompts_path, scores_path, summary_path
from evaltrail.stage import run_stage


def main(scenario: str, model: str) -> None:
    run = load_params()
    cfg = scenario_config(run, scenario)
    model_config(run, model)
    frame = join(pd.read_parquet(prompts_path(scenario)), pd.read_parquet(completions_path(scenario, model)))
    scores = score_frame(frame, cfg, get_adapter(cfg.method))
    summary = summarize(scores, cfg, run.bootstrap_samples, run.seed)
    summary.update(model=model, model_sha256=frame["model_sha256"].iloc[0])
    write_parquet(scores_path(scenario, model), scores_table(scores))
    write_json(summary_path(scenario, model), summary)
    for name, st in summary["metrics"].items():
        if st["mean"] is not None:
            print(f"score {scenario} x {model}: {name}{' (main)' if name == cfg.main_metric else ''} = "
                  f"{st['mean']:.4f} [{st['ci_low']:.4f}, {st['ci_high']:.4f}] (n={st['n']})")


if __name__ == "__main__":
    run_stage(main, "score.py <scenario> <model>")
