"""evaltrail.judge.battle: answers -> judge requests -> verdicts -> ratings, with a stubbed judge
(the real judge runs in test_battle_pipeline)."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest

from evaltrail.config import parse_params, run_from_conf
from evaltrail.errors import EvaltrailError
from evaltrail.judge.arena import JudgePrompt, battles_from_margins
from evaltrail.judge.battle import contestant_answers, judge_prompts, summarize, to_markdown, verdict_table
from evaltrail.schema import COMPLETIONS_SCHEMA

from .conftest import ROOT

TEMPLATE = "Q: {instruction}\nA: {first}\nB: {second}\nBetter:"


def _prompts(n: int) -> pd.DataFrame:
    rows = [
        {
            "request_id": f"r{i}",
            "instance_id": f"i{i}",
            "input": f"instruction {i}",
            "method": "generate",
            "perturbation": None,
            "trial": 0,
        }
        for i in range(n)
    ]
    rows.append(
        {
            "request_id": "r0-typo",
            "instance_id": "i0-typo",
            "input": "instrucion 0",
            "method": "generate",
            "perturbation": "typos",
            "trial": 0,
        }
    )  # variants are not judged
    return pd.DataFrame(rows)


def _completions(n: int, answer) -> pd.DataFrame:
    return pd.DataFrame({"request_id": [f"r{i}" for i in range(n)], "text": [answer(i) for i in range(n)]})


def _stub_judge(reqs: pd.DataFrame, logprob_of) -> pa.Table:
    """What run_requests would return: one completion per request, from a deterministic stub."""
    rows = [
        {
            "request_id": r.request_id,
            "text": None,
            "logprob": logprob_of(r.prompt, r.continuation),
            "num_prompt_tokens": len(r.prompt.split()),
            "truncated_tokens": 0,
        }
        for r in reqs.itertuples(index=False)
    ]
    return pa.Table.from_pylist(rows, schema=pa.schema([COMPLETIONS_SCHEMA.field(c) for c in rows[0]]))


def test_answers_take_the_original_generation_of_each_model_cut_at_a_word():
    answers = contestant_answers(
        _prompts(2),
        {"m1": _completions(2, lambda i: f"  answer {i} " + "word " * 10), "m2": _completions(2, lambda i: "short")},
        max_chars=20,
    )
    assert list(answers["instance_id"]) == ["i0", "i1", "i0", "i1"]
    assert answers.loc[0, "answer"] == "answer 0 word word [...]" and answers.loc[2, "answer"] == "short"
    assert set(answers["request_id"]) == {"r0", "r1"}


def test_a_missing_completion_names_the_model_and_request():
    with pytest.raises(EvaltrailError, match="completions of m2 lack request r1"):
        contestant_answers(_prompts(2), {"m1": _completions(2, str), "m2": _completions(1, str)}, None)


def test_logprob_requests_score_each_label_after_the_same_prompt():
    prompt = JudgePrompt(TEMPLATE, {"A": "first", "B": "second", "C": "tie"}, method="logprob")
    answers = contestant_answers(_prompts(2), {m: _completions(2, lambda i, m=m: f"{m}-{i}") for m in "xyz"}, None)
    judgements, reqs = judge_prompts(answers, prompt)
    assert len(judgements) == 2 * 3 * 2  # instances x pairs x orders
    assert len(reqs) == 3 * len(judgements) and set(reqs["continuation"]) == {"A", "B", "C"}
    assert reqs["request_id"].is_unique and (reqs["method"] == "loglikelihood").all()
    gen_j, gen_r = judge_prompts(answers, JudgePrompt(TEMPLATE))
    assert list(gen_j["judgement_id"]) == list(judgements["judgement_id"])  # ids hash the judged prompt only
    assert list(gen_r["request_id"]) == list(gen_j["judgement_id"]) and (gen_r["method"] == "generate").all()


def test_summing_both_orders_cancels_the_judges_preference_for_the_first_answer():
    """A judge that adds +3 nats to whichever answer is shown first, and prefers the longer answer by
    1 nat per extra word: read naively it always says "first"; summed over both orders the longer
    answer wins every pair."""
    prompt = JudgePrompt(TEMPLATE, {"A": "first", "B": "second", "C": "tie"}, method="logprob")
    lengths = {"long": 3, "mid": 2, "short": 1}
    comps = {m: _completions(4, lambda i, k=k: " ".join(["w"] * k)) for m, k in lengths.items()}
    answers = contestant_answers(_prompts(4), comps, None)
    judgements, reqs = judge_prompts(answers, prompt)

    def logprob_of(text, label):
        first = len(text.split("\nA: ")[1].split("\n")[0].split())
        second = len(text.split("\nB: ")[1].split("\n")[0].split())
        return {"A": 3.0 + first - 10, "B": second - 10, "C": -20.0}[label]

    verdicts = verdict_table(judgements, reqs, _stub_judge(reqs, logprob_of), prompt, "judge", "f" * 64).to_pandas()
    assert set(verdicts["verdict"]) == {"first"} and verdicts["label_logprobs"].map(len).eq(3).all()
    battles, stats = battles_from_margins(verdicts, tie_margin=0.0)
    expect = {("long", "mid"): "model_a", ("long", "short"): "model_a", ("mid", "short"): "model_a"}
    assert all(expect[(a, b)] == w for a, b, w in battles[["model_a", "model_b", "winner"]].itertuples(index=False))
    assert stats["agreement"] == 0.0 and stats["position_bias"] == pytest.approx(3.0)

    summary = summarize(verdicts, prompt, samples=50, seed=0, C=1.0)
    assert [r["model"] for r in summary["ratings"]] == ["long", "mid", "short"]
    assert summary["win_rate"]["long"]["short"] == 1.0 and summary["win_rate"]["short"]["long"] == 0.0
    assert summary["verdicts"] == {"first": 24, "second": 0, "tie": 0, "undefined": 0}
    assert summary["judge_sha256"] == "f" * 64 and "| 1 | long |" in to_markdown("s", summary)


def test_generated_verdicts_count_unparsable_replies_as_undefined():
    prompt = JudgePrompt(TEMPLATE)
    comps = {m: _completions(2, lambda i, m=m: m) for m in ("p", "q")}
    judgements, reqs = judge_prompts(contestant_answers(_prompts(2), comps, None), prompt)
    replies = iter(["A", "B", "hmm", "C"])  # instance 0: ab says p, ba says p -> p wins; instance 1: undefined
    rows = [
        {"request_id": r, "text": next(replies), "logprob": 0.0, "num_prompt_tokens": 5, "truncated_tokens": 0}
        for r in reqs["request_id"]
    ]
    out = pa.Table.from_pylist(rows, schema=pa.schema([COMPLETIONS_SCHEMA.field(c) for c in rows[0]]))
    verdicts = verdict_table(judgements, reqs, out, prompt, "judge", "0" * 64).to_pandas()
    summary = summarize(verdicts, prompt, samples=20, seed=0, C=1.0)
    assert summary["verdicts"]["undefined"] == 1 and summary["pairs_undefined"] == 1
    assert summary["outcomes"] == {"model_a": 1, "tie": 1} and summary["agreement"] == 1.0
    assert verdicts["output"].tolist() == ["A", "B", "hmm", "C"]  # the raw replies, kept as given
    assert verdicts["verdict"].fillna("none").tolist() == ["first", "second", "none", "tie"]


def test_the_battle_suite_composes_and_bad_battle_configs_name_the_key():
    run = run_from_conf(["suite=battle"], ROOT / "conf")
    cfg = run.battle["best_chatgpt_prompts"]
    assert cfg.judge in run.model and cfg.models(run.models) == sorted(run.models) and cfg.prompt().method == "logprob"
    raw = {
        "seed": 0,
        "max_eval_instances": 1,
        "bootstrap_samples": 10,
        "scenarios": [],
        "models": [],
        "mlflow": {},
        "scenario": {},
        "model": {},
    }
    good = {"judge": "j", "template": TEMPLATE, "labels": {"A": "first", "B": "second"}, "max_tokens": 2, "stop": []}
    with pytest.raises(EvaltrailError, match=r"battle\.s: battles need scenario 's'"):
        parse_params({**raw, "battle": {"s": good}})
    scen = {"s": {"method": "generation", "eval_split": "test", "metrics": [], "main_metric": None, "sources": []}}
    model = {"j": {"backend": "openai", "server": {"base_url": "http://x", "model": "m"}}}
    with pytest.raises(EvaltrailError, match=r"battle\.s\.judge: 'k' is not a model of the run"):
        parse_params({**raw, "scenario": scen, "model": model, "battle": {"s": {**good, "judge": "k"}}})
    with pytest.raises(EvaltrailError, match=r"battle\.s\.contestants: a battle needs at least two models"):
        parse_params({**raw, "scenario": scen, "model": model, "battle": {"s": good}})
    two = {**model, "k": model["j"]}
    with pytest.raises(EvaltrailError, match=r"battle\.s\.template/labels: judge prompt template lacks \{second\}"):
        parse_params(
            {**raw, "scenario": scen, "model": two, "battle": {"s": {**good, "template": "{instruction} {first}"}}}
        )
    with pytest.raises(EvaltrailError, match=r"battle\.s\.template/labels: judge method 'vote'"):
        parse_params({**raw, "scenario": scen, "model": two, "battle": {"s": {**good, "method": "vote"}}})
