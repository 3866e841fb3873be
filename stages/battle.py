"""battle@<scenario>: a judge model compares every pair of contestants' answers, in both orders."""

import pandas as pd

from evaltrail.io import write_json, write_parquet, write_text
from evaltrail.judge import run_judge
from evaltrail.judge.battle import contestant_answers, judge_prompts, summarize, to_markdown, verdict_table
from evaltrail.paths import battle_ratings_md, battle_ratings_path, battle_verdicts_path, completions_path, prompts_path
from evaltrail.stage import run_stage
from evaltrail.stage_params import load_stage_params


def main(scenario: str) -> None:
    run = load_stage_params("battle", scenario)
    cfg = run.battle[scenario]
    prompt = cfg.prompt()
    completions = {m: pd.read_parquet(completions_path(scenario, m)) for m in cfg.models(run.models)}
    answers = contestant_answers(pd.read_parquet(prompts_path(scenario)), completions, cfg.max_answer_chars)
    judgements, reqs = judge_prompts(answers, prompt)
    outputs, computed, identity = run_judge(run, cfg.judge, reqs, f"battle {scenario} judged by {cfg.judge}")
    verdicts = verdict_table(judgements, reqs, outputs, prompt, cfg.judge, identity["sha256"])
    summary = summarize(
        verdicts.to_pandas(), prompt, run.bootstrap_samples, run.seed, cfg.penalty_C, f"battle.{scenario}.penalty_C"
    )
    write_parquet(battle_verdicts_path(scenario), verdicts)
    write_json(battle_ratings_path(scenario), {"scenario": scenario, **summary})
    write_text(battle_ratings_md(scenario), to_markdown(scenario, summary))
    print(
        f"battle {scenario}: {len(judgements)} judgements, {len(reqs)} judge requests ({len(reqs) - computed} "
        f"from cache), agreement "
        f"{summary['agreement']:.1%}, undefined {summary['verdicts']['undefined']}; "
        + ", ".join(f"{r['model']} {r['rating']:.0f}" for r in summary["ratings"])
    )


if __name__ == "__main__":
    run_stage(main, "battle.py <scenario>")
