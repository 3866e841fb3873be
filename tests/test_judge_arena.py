"""Pairwise judging: requests for both orders, verdict parsing, battles that cancel position bias."""

from __future__ import annotations

import pandas as pd
import pytest

from evaltrail.errors import EvaltrailError
from evaltrail.judge.arena import JudgePrompt, battles_from_verdicts, judge_requests, parse_verdict, win_rate_matrix

PROMPT = JudgePrompt(template="Q: {instruction}\nA: {first}\nB: {second}\nBetter (A, B or C for a tie):")
ANSWERS = pd.DataFrame(
    [
        {"instance_id": "i1", "instruction": "Capital of France?", "model": "m1", "answer": "Paris"},
        {"instance_id": "i1", "instruction": "Capital of France?", "model": "m2", "answer": "Lyon"},
        {"instance_id": "i1", "instruction": "Capital of France?", "model": "m3", "answer": "Paris, France"},
        {"instance_id": "i2", "instruction": "2+2?", "model": "m1", "answer": "4"},
        {"instance_id": "i2", "instruction": "2+2?", "model": "m2", "answer": "5"},
    ]
)


def test_every_pair_is_judged_in_both_orders_with_content_ids():
    req = judge_requests(ANSWERS, PROMPT)
    assert len(req) == 2 * 3 + 2 * 1  # i1: 3 pairs, i2: 1 pair; two orders each
    first = req[(req["instance_id"] == "i1") & (req["model_a"] == "m1") & (req["model_b"] == "m2")]
    assert first["order"].tolist() == ["ab", "ba"]
    assert "A: Paris\nB: Lyon" in first["prompt"].iloc[0] and "A: Lyon\nB: Paris" in first["prompt"].iloc[1]
    assert req["judgement_id"].is_unique
    shuffled = judge_requests(ANSWERS.sample(frac=1, random_state=3), PROMPT)
    pd.testing.assert_frame_equal(shuffled, req)  # row order of the answers never matters


@pytest.mark.parametrize(
    "output, verdict",
    [
        ("A", "first"),
        (" B. The second is right", "second"),
        ("C", "tie"),
        ("I think A is better than B", "first"),
        ("Answer: neither", None),
        ("", None),
        ("BA", None),
    ],
)
def test_verdict_is_the_earliest_whole_word_label(output, verdict):
    assert parse_verdict(output, PROMPT) == verdict


def test_both_orders_must_agree_for_a_win():
    req = judge_requests(ANSWERS, PROMPT)
    # i1 m1-m2: both orders prefer Paris (m1): "A" then "B" -> m1 wins
    # i1 m1-m3: the judge always says "A" (position bias) -> disagreement -> tie
    # i1 m2-m3: "B" in ab (m3) and "A" in ba (m3 shown first) -> m3 wins
    # i2 m1-m2: ab has no verdict -> tie, counted as undefined
    said = {
        ("i1", "m1", "m2", "ab"): "A",
        ("i1", "m1", "m2", "ba"): "B",
        ("i1", "m1", "m3", "ab"): "A",
        ("i1", "m1", "m3", "ba"): "A",
        ("i1", "m2", "m3", "ab"): "B",
        ("i1", "m2", "m3", "ba"): "A",
        ("i2", "m1", "m2", "ab"): "no idea",
        ("i2", "m1", "m2", "ba"): "B",
    }
    req["verdict"] = [
        parse_verdict(said[(r.instance_id, r.model_a, r.model_b, r.order)], PROMPT) for r in req.itertuples()
    ]
    battles, stats = battles_from_verdicts(req)
    assert battles[["instance_id", "model_a", "model_b", "winner"]].values.tolist() == [
        ["i1", "m1", "m2", "model_a"],
        ["i1", "m1", "m3", "tie"],
        ["i1", "m2", "m3", "model_b"],
        ["i2", "m1", "m2", "tie"],
    ]
    assert stats == {"pairs": 4, "agree": 2, "undefined": 1, "agreement": 2 / 3}
    wr = win_rate_matrix(battles)
    assert wr.loc["m1", "m2"] == 0.75 and wr.loc["m2", "m1"] == 0.25  # a win and a tie
    assert wr.loc["m3", "m2"] == 1.0 and wr.loc["m1", "m3"] == 0.5 and pd.isna(wr.loc["m1", "m1"])


def test_a_bad_prompt_or_duplicate_answer_is_refused():
    with pytest.raises(EvaltrailError, match="lacks {second}"):
        JudgePrompt(template="{instruction} {first}")
    with pytest.raises(EvaltrailError, match="must map to first/second/tie"):
        JudgePrompt(template="{instruction}{first}{second}", labels={"A": "left"})
    with pytest.raises(EvaltrailError, match="two answers of one model to instance i2"):
        judge_requests(pd.concat([ANSWERS, ANSWERS.tail(1)]), PROMPT)
