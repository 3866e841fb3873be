"""rag@<scenario>: Ragas' faithfulness, answer relevancy, context precision and context recall of
every model's answers, from a judge model's checks and pinned sentence embeddings."""

import pandas as pd

from evaltrail.io import write_json, write_parquet
from evaltrail.judge import rag, run_judge
from evaltrail.judge.embed import load_embedder
from evaltrail.paths import completions_path, prompts_path, rag_checks_path, rag_scores_path, rag_summary_path, raw_dir
from evaltrail.stage import run_stage
from evaltrail.stage_params import load_stage_params


def main(scenario: str) -> None:
    run = load_stage_params("rag", scenario)
    cfg = run.rag[scenario]
    completions = {m: pd.read_parquet(completions_path(scenario, m)) for m in run.models}
    items = rag.rag_items(pd.read_parquet(prompts_path(scenario)), completions)
    chk = rag.checks(items, cfg)
    reqs = rag.requests(chk, cfg)
    outputs, computed, identity = run_judge(run, cfg.judge, reqs, f"rag {scenario} judged by {cfg.judge}")
    done = rag.read_checks(chk, reqs, outputs, cfg, identity["sha256"])
    table = rag.scores(items, done.to_pandas(), load_embedder(raw_dir(scenario) / cfg.embedding))
    summaries = {m: rag.summary(table, m, scenario, cfg.judge, identity["sha256"]) for m in sorted(completions)}
    write_parquet(rag_checks_path(scenario), done)
    write_parquet(rag_scores_path(scenario), rag.scores_table(table))
    write_json(rag_summary_path(scenario), summaries)
    print(f"rag {scenario}: {len(chk)} checks, {len(reqs)} judge requests ({len(reqs) - computed} from cache)")
    for m, s in summaries.items():
        print(f"rag {scenario} x {m}: " + ", ".join(f"{k} = {rag.shown(v)}" for k, v in s["metrics"].items()))


if __name__ == "__main__":
    run_stage(main, "rag.py <scenario>")
