"""aggregate: leaderboard (CSV/Markdown/JSON), DVC metrics, and one MLflow run per cell."""

import dataclasses

from evaltrail.aggregate import collect, leaderboard, metrics_json, to_markdown
from evaltrail.config import load_params
from evaltrail.io import write_json, write_text
from evaltrail.paths import (LEADERBOARD_CSV, LEADERBOARD_JSON, LEADERBOARD_MD, METRICS_JSON,
                             MLFLOW_RUNS_JSON, scores_path, summary_path)
from evaltrail.provenance.lock import git_commit, load_lock
from evaltrail.stage import run_stage
from evaltrail.tracking import log_cell, shown_uri, tracking_uri
from evaltrail.tracking.lineage import cell_tags


def main() -> None:
    run = load_params()
    summaries = collect(run)
    board = leaderboard(summaries)
    write_text(LEADERBOARD_CSV, board.to_csv(index=False, float_format="%.6f"))
    write_text(LEADERBOARD_MD, to_markdown(board))
    write_json(LEADERBOARD_JSON, board.to_dict(orient="records"))
    write_json(METRICS_JSON, metrics_json(board))

    lock, commit, runs = load_lock(), git_commit(), {}
    for (s, m), summary in summaries.items():
        config = {"seed": run.seed, "max_eval_instances": run.max_eval_instances,
                  "scenario": dataclasses.asdict(run.scenario[s]), "model": dataclasses.asdict(run.model[m])}
        run_id, created = log_cell(run.mlflow["experiment"], f"{s}/{m}", config, summary,
                                   cell_tags(lock, s, m, summary, commit),
                                   [scores_path(s, m), summary_path(s, m)])
        runs[f"{s}/{m}"] = run_id
        print(f"mlflow {s}/{m}: run {run_id} ({'logged' if created else 'unchanged, kept'})")
    write_json(MLFLOW_RUNS_JSON, {"tracking_uri": shown_uri(tracking_uri()), "experiment": run.mlflow["experiment"],
                                  "runs": runs})
    print(f"aggregate: {len(board)} leaderboard rows -> {LEADERBOARD_MD}")


if __name__ == "__main__":
    run_stage(main, "aggregate.py")
