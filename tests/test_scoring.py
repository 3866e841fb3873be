"""score_frame + summarize on a small hand-made frame: multiple golds, variants, families, CIs."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from evaltrail.adapters import generation
from evaltrail.config import ScenarioConfig
from evaltrail.metrics.registry import Context
from evaltrail.metrics.scoring import corpus_inputs, score_frame, summarize


def row(iid, text, golds, perturbation=None, original=None, runtime=0.5):
    meta = {"original_id": original} if original else {}
    return {
        "request_id": f"r-{iid}",
        "instance_id": iid,
        "trial": 0,
        "method": "generate",
        "text": text,
        "references": [{"text": g, "correct": True} for g in golds] + [{"text": "wrong", "correct": False}],
        "metadata": json.dumps(meta),
        "perturbation": perturbation,
        "calibration": False,
        "choice_index": None,
        "logprob": -1.0,
        "continuation": None,
        "runtime_s": runtime,
        "num_prompt_tokens": 10,
        "num_evaluated_tokens": 8,
        "num_output_tokens": 2,
    }


CFG = ScenarioConfig(
    name="qa",
    method="generation",
    eval_split="test",
    sources=[],
    main_metric="quasi_exact_match",
    metrics=["quasi_exact_match", "f1_score", "toxic_fraction", "prompt_tokens", "output_tokens"],
)
FRAME = pd.DataFrame(
    [
        row("a", "The Paris.", ["Lyon", "paris"]),  # second gold matches after normalization
        row("b", "berlin", ["Bonn"]),
        row("c", "Rome", ["rome"]),
        row("a2", "lyon?", ["Lyon", "paris"], "mild_mix", "a"),  # a variant that is also right
        row("c2", "Milan", ["rome"], "dialect", "c"),  # a fairness variant that breaks c
    ]
)


def test_scores_take_the_best_gold_and_keep_variants_apart():
    scores = score_frame(FRAME, CFG, generation)
    qem = scores[scores["metric"] == "quasi_exact_match"].set_index("instance_id")
    assert qem.loc["a", "value"] == 1.0 and qem.loc["b", "value"] == 0.0 and qem.loc["c", "value"] == 1.0
    assert qem.loc["c2", "perturbation"] == "dialect" and qem.loc["c2", "original_id"] == "c"
    worst = scores.set_index(["metric", "instance_id"])["value"]
    assert worst[("quasi_exact_match/fairness", "c")] == 0.0 and worst[("quasi_exact_match/robustness", "a")] == 1.0
    assert ("prompt_tokens/robustness", "a") not in worst.index  # only accuracy metrics get worst cases


def test_summary_families_cis_and_corpus_metrics():
    scores = score_frame(FRAME, CFG, generation)
    summary = summarize(scores, corpus_inputs(FRAME, CFG, Context()), CFG, 200, 0)
    m = summary["metrics"]
    assert summary["n_instances"] == 3 and summary["n_variants"] == 2
    assert m["quasi_exact_match"]["mean"] == pytest.approx(2 / 3) and m["quasi_exact_match"]["ci"] == "wilson"
    assert m["quasi_exact_match/fairness"]["mean"] == pytest.approx(1 / 3)
    assert (
        m["quasi_exact_match/fairness"]["family"] == "fairness"
        and m["quasi_exact_match/mild_mix"]["family"] == "robustness"
    )
    assert m["toxic_fraction"]["family"] == "toxicity" and m["toxic_fraction"]["higher_is_better"] is False
    assert m["prompt_tokens"]["mean"] == 10 and m["prompt_tokens"]["n"] == 3  # originals only
    assert m["prompt_tokens"]["family"] == "efficiency" and m["prompt_tokens"]["higher_is_better"] is None


def test_a_corpus_metric_the_method_cannot_feed_fails_by_name():
    from evaltrail.errors import EvaltrailError

    cfg = ScenarioConfig(
        name="qa", method="generation", eval_split="test", sources=[], main_metric=None, metrics=["ece_10_bin"]
    )
    with pytest.raises(EvaltrailError, match="scenario.qa.metrics: ece_10_bin"):
        corpus_inputs(FRAME, cfg, Context())
