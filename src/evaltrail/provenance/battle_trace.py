"""`evaltrail trace --battle`: a battle rating back to verdicts, answers, judge weights and data.

ratings.json -> refit from verdicts.parquet -> each judgement re-derived from the contestants'
completions (its id hashes the prompt the judge saw, so equal ids mean the judge read exactly
these answers) -> completions, prompts, raw data -> the judge's and contestants' weights. Files
are checked against dvc.lock as in `evaltrail trace`.
"""

from __future__ import annotations

import pandas as pd

from ..config import RunConfig
from ..errors import EvaltrailError
from ..io import read_json
from ..judge.battle import contestant_answers, judge_prompts, summarize
from ..paths import battle_dir, completions_path, prompts_path, raw_dir
from .lock import git_commit, load_lock
from .trace import Trace, _artifact, _close, _raw_files, check_model


def trace_battle(run: RunConfig, scenario: str, model: str) -> Trace:
    if scenario not in run.battle:
        raise EvaltrailError(f"params.yaml: no battle.{scenario}; battles: {', '.join(sorted(run.battle)) or '(none)'}")
    cfg, t, lock = run.battle[scenario], Trace(), load_lock()
    stage, out = f"battle@{scenario}", battle_dir(scenario)
    ratings_path, verdicts_path = out / "ratings.json", out / "verdicts.parquet"
    if not ratings_path.is_file() or not verdicts_path.is_file():
        raise EvaltrailError(f"{out}: missing ratings.json or verdicts.parquet; run `dvc repro`")
    summary = read_json(ratings_path)
    row = next((r for r in summary["ratings"] if r["model"] == model), None)
    if row is None:
        raise EvaltrailError(
            f"{ratings_path}: no rating for {model}; rated: " + ", ".join(r["model"] for r in summary["ratings"])
        )
    t.lines.append(
        f"battle {scenario} / {model}: rating {row['rating']:.3f}, 95% CI [{row['ci_low']:.3f}, "
        f"{row['ci_high']:.3f}], rank {row['rank']}, {row['battles']} battles"
    )
    _artifact(t, lock, stage, ratings_path, "ratings")
    _artifact(t, lock, stage, verdicts_path, "verdicts")

    verdicts = pd.read_parquet(verdicts_path)
    prompt = cfg.prompt()
    refit = summarize(verdicts, prompt, run.bootstrap_samples, run.seed, cfg.penalty_C)
    again = next((r for r in refit["ratings"] if r["model"] == model), {})
    t.check(
        _close(again.get("rating", float("nan")), row["rating"]),
        f"verdicts: refit from {len(verdicts)} judgements gives rating {again.get('rating'):.3f} "
        f"({prompt.method} rule, agreement {refit['agreement']:.1%}, undefined {refit['verdicts']['undefined']})",
        f"verdicts: {verdicts_path} refits to {again.get('rating')}, ratings.json says {row['rating']}",
    )

    models = cfg.models(run.models)
    completions = {}
    for m in models:
        _artifact(t, lock, f"infer@{scenario}-{m}", completions_path(scenario, m), f"completions of {m}")
        if completions_path(scenario, m).is_file():
            completions[m] = pd.read_parquet(completions_path(scenario, m))
    if len(completions) == len(models):
        answers = contestant_answers(pd.read_parquet(prompts_path(scenario)), completions, cfg.max_answer_chars)
        expected = set(judge_prompts(answers, prompt)[0]["judgement_id"])
        seen = set(verdicts["judgement_id"])
        t.check(
            expected == seen,
            f"judgements: all {len(seen)} re-derived from these completions and the judge "
            f"prompt (content-hash ids match)",
            f"judgements: {len(seen - expected)} verdict(s) judged answers these completions do not give, "
            f"{len(expected - seen)} expected judgement(s) missing; re-run {stage}",
        )
    _artifact(t, lock, f"prepare@{scenario}", prompts_path(scenario), "prompts")
    _artifact(t, lock, f"fetch@{scenario}", raw_dir(scenario), "raw data")
    _raw_files(t, run, scenario)

    shas = sorted(set(verdicts["judge_sha256"]))
    t.lines.append(f"judge: {cfg.judge} ({prompt.method}), identity recorded in every verdict: {', '.join(shas)}")
    check_model(t, run, lock, cfg.judge, shas[0] if len(shas) == 1 else None, "the verdicts were made by")
    for m in models:
        if m != cfg.judge and m in completions:
            made = sorted(set(completions[m]["model_sha256"]))
            check_model(t, run, lock, m, made[0] if len(made) == 1 else None, "completions were made by")
    t.lines.append(f"code: git commit {git_commit(strict=True)}")
    return t
