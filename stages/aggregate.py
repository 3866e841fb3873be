"""aggregate: leaderboard (CSV/Markdown/JSON) with family tables, win rates, pairwise ratings and
significance, plot data, DVC metrics, and MLflow runs (one parent, one child per cell)."""

import dataclasses

import pandas as pd

from evaltrail.aggregate import families, pairwise, plots, reproduction
from evaltrail.aggregate.leaderboard import collect, leaderboard, metrics_json, to_markdown
from evaltrail.config import group_of
from evaltrail.io import read_json, write_json, write_text
from evaltrail.judge.battle import to_markdown as battle_markdown
from evaltrail.metrics.refusal import classifier_sections
from evaltrail.paths import (
    FAMILIES_JSON,
    LEADERBOARD_CSV,
    LEADERBOARD_JSON,
    LEADERBOARD_MD,
    METRICS_JSON,
    MLFLOW_RUNS_JSON,
    PAIRWISE_JSON,
    PLOTS,
    REPRODUCTION_JSON,
    REPRODUCTION_MD,
    battle_ratings_path,
    prepare_report_path,
    scores_path,
    summary_path,
)
from evaltrail.provenance.lock import git_commit, load_lock
from evaltrail.stage import run_stage
from evaltrail.stage_params import load_stage_params
from evaltrail.tracking import log_cell, log_parent, shown_uri, tracking_uri
from evaltrail.tracking.lineage import cell_tags


def main() -> None:
    run = load_stage_params("aggregate")
    card = reproduction.parse(run.reproduce, run)  # a bad `reproduce` block fails before anything is written
    summaries = collect(run)
    prepared = {s: read_json(prepare_report_path(s)) for s in run.scenarios}  # evaluation-set sizes
    reproduced = reproduction.table(card, run, summaries, prepared) if card else []
    board = leaderboard(summaries)
    tables = families.family_tables(summaries)
    outcomes = pairwise.main_outcomes({k: pd.read_parquet(scores_path(*k)) for k in summaries}, summaries)
    ratings, fit = pairwise.ratings(outcomes, run.bootstrap_samples, run.seed)
    diffs = pairwise.differences(outcomes, run.bootstrap_samples, run.seed)
    subjects = plots.subjects(summaries)
    battles = [(b, read_json(battle_ratings_path(b))) for b in sorted(run.battle_scenarios)]
    sections = (
        [
            "",
            "## By family",
            "",
            "Each family's headline metric per scenario, and HELM's mean win rate "
            "(the share of other models a model beats per column, a tie counting 1/2, averaged).",
        ]
        + families.to_markdown(tables)
        + pairwise.to_markdown(ratings, fit, diffs)
        + plots.subjects_markdown(subjects, summaries)
        + [line for b, summary in battles for line in ["", *battle_markdown(b, summary, level=2).splitlines()]]
        + classifier_sections(summaries)
    )
    write_text(LEADERBOARD_CSV, board.to_csv(index=False, float_format="%.6f"))
    write_text(LEADERBOARD_MD, to_markdown(board, sections, {s: group_of(c) for s, c in run.scenario.items()}))
    write_json(LEADERBOARD_JSON, board.to_dict(orient="records"))
    write_json(FAMILIES_JSON, families.to_records(tables))
    write_json(
        PAIRWISE_JSON,
        {
            "fit": fit,
            "ratings": ratings.reset_index().to_dict(orient="records"),
            "differences": diffs.to_dict(orient="records"),
        },
    )
    write_json(METRICS_JSON, metrics_json(board))
    first = summaries[(run.scenarios[0], card.model)] if card else {}
    sha, engine = first.get("model_sha256"), first.get("engine")
    write_text(REPRODUCTION_MD, reproduction.to_markdown(card, reproduced, sha, engine))
    write_json(
        REPRODUCTION_JSON,
        {"suite": card.name if card else None, "model_sha256": sha, "engine": engine, "rows": reproduced},
    )
    for name, table in (
        (plots.ACC_VS_TOKENS, plots.accuracy_vs_tokens(summaries)),
        (plots.RELIABILITY, plots.reliability(summaries)),
        (plots.SUBJECTS, subjects),
    ):
        write_text(PLOTS / name, table.to_csv(index=False, float_format="%.6f"))

    lock, commit, runs = load_lock(), git_commit(), {}
    parent = log_parent(
        run.mlflow["experiment"], board, commit, [LEADERBOARD_CSV, LEADERBOARD_MD, PAIRWISE_JSON, REPRODUCTION_MD]
    )
    for (s, m), summary in summaries.items():
        config = {
            "seed": run.seed,
            "max_eval_instances": run.max_eval_instances,
            "scenario": dataclasses.asdict(run.scenario[s]),
            "model": dataclasses.asdict(run.model[m]),
        }
        run_id, created = log_cell(
            run.mlflow["experiment"],
            f"{s}/{m}",
            config,
            summary,
            cell_tags(lock, s, m, summary, commit),
            [scores_path(s, m), summary_path(s, m)],
            parent=parent,
        )
        runs[f"{s}/{m}"] = run_id
        print(f"mlflow {s}/{m}: run {run_id} ({'logged' if created else 'unchanged, kept'})")
    write_json(
        MLFLOW_RUNS_JSON,
        {
            "tracking_uri": shown_uri(tracking_uri()),
            "experiment": run.mlflow["experiment"],
            "parent": parent,
            "runs": runs,
        },
    )
    print(f"aggregate: {len(board)} leaderboard rows, {len(tables)} families -> {LEADERBOARD_MD}")
    if card:
        print(
            f"reproduction {card.name}: {sum(r['within_tolerance'] for r in reproduced)} of {len(reproduced)} "
            f"rows within ±{card.tolerance:g} points -> {REPRODUCTION_MD}"
        )


if __name__ == "__main__":
    run_stage(main, "aggregate.py")
