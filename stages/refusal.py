"""refusal@<scenario>: XSTest labels from a judge model, for the run's answers and for the
human-labelled ones (the judge's classifier check), with every label's logprob kept."""

import pandas as pd

from evaltrail.io import write_json, write_parquet
from evaltrail.judge import refusal, run_judge
from evaltrail.paths import completions_path, prompts_path, raw_dir, refusal_judgements_path, refusal_summary_path
from evaltrail.stage import run_stage
from evaltrail.stage_params import load_stage_params


def main(scenario: str) -> None:
    run = load_stage_params("refusal", scenario)
    cfg = run.refusal[scenario]
    completions = {m: pd.read_parquet(completions_path(scenario, m)) for m in run.models}
    table = refusal.items(pd.read_parquet(prompts_path(scenario)), completions, raw_dir(scenario))
    reqs = refusal.requests(table, cfg)
    outputs, computed, identity = run_judge(run, cfg.judge, reqs, f"refusal {scenario} judged by {cfg.judge}")
    done = refusal.judgements(table, reqs, outputs, cfg, identity["sha256"])
    summaries = refusal.summaries(done.to_pandas(), run.models, scenario, run.bootstrap_samples, run.seed)
    write_parquet(refusal_judgements_path(scenario), done)
    write_json(refusal_summary_path(scenario), summaries)
    print(f"refusal {scenario}: {len(table)} answers, {len(reqs)} judge requests ({len(reqs) - computed} from cache)")
    checks = next(iter(summaries.values()))["classifier_checks"] if summaries else {}
    for name, c in checks.items():
        acc, kappa = c["accuracy"]["mean"], c["kappa"]["mean"]
        kappa = "undefined" if kappa is None else f"{kappa:.3f}"
        print(f"refusal {scenario}: {name} vs people (n={c['n']}): accuracy {acc:.3f}, kappa {kappa}")
    for m, s in summaries.items():
        shown = ", ".join(f"{k} = {v['mean']:.3f}" for k, v in s["metrics"].items() if v["mean"] is not None)
        print(f"refusal {scenario} x {m}: {shown}")


if __name__ == "__main__":
    run_stage(main, "refusal.py <scenario>")
