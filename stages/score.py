"""score@<scenario>-<model>: per-instance metric values (Parquet) and their summary with 95% CIs (JSON)."""

import sys

import pandas as pd

from evaltrail import resources
from evaltrail.adapters import get_adapter
from evaltrail.config import load_params, model_config, scenario_config
from evaltrail.io import computed_by, write_json, write_parquet
from evaltrail.metrics import check_metrics, word_lists
from evaltrail.metrics.corpus import Context
from evaltrail.metrics.scoring import (corpus_inputs, group_means, join, score_frame, scorers, scores_table,
                                      summarize)
from evaltrail.paths import completions_path, prompts_path, raw_dir, scores_path, summary_path
from evaltrail.stage import run_stage


def main(scenario: str, model: str) -> None:
    run = load_params()
    cfg = scenario_config(run, scenario)
    model_config(run, model)
    check_metrics(cfg.metrics, f"params.yaml: scenario.{scenario}.metrics")
    frame = join(pd.read_parquet(prompts_path(scenario)), pd.read_parquet(completions_path(scenario, model)))
    lists = "bias_word_lists" in word_lists(cfg.metrics)
    ctx = Context(word_lists=resources.path(run.resources, raw_dir(scenario), "bias_word_lists") if lists else None)
    scores = score_frame(frame, cfg, get_adapter(cfg.method))
    summary = summarize(scores, corpus_inputs(frame, cfg, ctx), cfg, run.bootstrap_samples, run.seed)
    summary.update(model=model, model_sha256=frame["model_sha256"].iloc[0], scorers=scorers(cfg),
                   groups=group_means(scores, frame, cfg), engine=computed_by(completions_path(scenario, model)))
    write_parquet(scores_path(scenario, model), scores_table(scores))
    write_json(summary_path(scenario, model), summary)
    for name, st in summary["metrics"].items():
        if st.get("warning"):
            print(f"warning: {scenario} x {model}: {name}: {st['warning']}", file=sys.stderr)
        if st["mean"] is not None and (name in cfg.metrics or name.endswith(("/robustness", "/fairness"))):
            print(f"score {scenario} x {model}: {name}{' (main)' if name == cfg.main_metric else ''} = "
                  f"{st['mean']:.4f} [{st['ci_low']:.4f}, {st['ci_high']:.4f}] (n={st['n']})")


if __name__ == "__main__":
    run_stage(main, "score.py <scenario> <model>")
