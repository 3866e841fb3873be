"""Seeded sampling of answers (num_samples > 1) and the unbiased pass@k estimator."""

from __future__ import annotations

import itertools
import json
from math import comb

import numpy as np
import pandas as pd
import pytest

from evaltrail import sandbox
from evaltrail.adapters.sampling import answer_samples
from evaltrail.backends.llama_cpp import draw_token
from evaltrail.config import ModelConfig, ScenarioConfig, build_scenario
from evaltrail.errors import EvaltrailError
from evaltrail.metrics import get_metric
from evaltrail.metrics.accuracy import pass_at_k_estimate
from evaltrail.schema import make_request


def test_the_estimator_is_chen_et_al_s_and_counts_every_k_subset():
    for n, c, k in [(10, 3, 1), (10, 3, 5), (10, 0, 5), (10, 10, 10), (7, 2, 3), (200, 13, 100)]:
        exact = 1 - comb(n - c, k) / comb(n, k)
        assert pass_at_k_estimate(n, c, k) == pytest.approx(exact, rel=1e-12, abs=1e-12)
    n, c, k = 6, 2, 3  # brute force: the share of k-subsets of the samples holding a passing one
    passing = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(passing, k))
    assert pass_at_k_estimate(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))
    assert pass_at_k_estimate(5, 3, 1) == pytest.approx(3 / 5)  # pass@1 is c / n


def _generation(**kw) -> ScenarioConfig:
    raw = {"method": "generation", "eval_split": "test", "metrics": [], "main_metric": None, "sources": [], **kw}
    return build_scenario(raw, "params.yaml: scenario.code", "code")


def test_each_sample_is_a_trial_with_its_own_seed():
    greedy = make_request("i1", 0, "generate", "def f():", max_tokens=8, stop=("\n\n",))
    assert answer_samples(greedy, _generation(), 0) == [greedy] and "sampling" not in greedy.content()
    cfg = _generation(num_samples=4, temperature=0.8)
    drawn = answer_samples(greedy, cfg, 0)
    assert [r.trial for r in drawn] == [0, 1, 2, 3] and {r.temperature for r in drawn} == {0.8}
    assert len({r.seed for r in drawn}) == 4 and len({r.request_id for r in drawn}) == 4
    assert all(0 <= r.seed < 2**63 for r in drawn)
    assert drawn[1].content()["sampling"] == {"temperature": 0.8, "seed": drawn[1].seed}
    assert [r.request_id for r in answer_samples(greedy, cfg, 0)] == [r.request_id for r in drawn]  # stable
    assert {r.seed for r in answer_samples(greedy, cfg, 1)}.isdisjoint({r.seed for r in drawn})  # the run's seed counts
    other = make_request("i2", 0, "generate", "def f():", max_tokens=8, stop=("\n\n",))
    assert {r.seed for r in answer_samples(other, cfg, 0)}.isdisjoint({r.seed for r in drawn})


@pytest.mark.parametrize(
    "knobs, match",
    [
        ({"num_samples": 4}, r"scenario\.code\.temperature: 0\.0 with num_samples 4"),
        ({"temperature": 0.5}, r"scenario\.code\.temperature: 0\.5 with num_samples 1"),
        ({"num_samples": 4, "temperature": 0.8, "num_train_trials": 2}, r"code\.num_train_trials: samples are"),
        ({"num_samples": 4, "temperature": 0.8, "method": "multiple_choice_joint"}, r"code\.num_samples: sampling"),
    ],
)
def test_bad_sampling_knobs_name_the_key(knobs, match):
    with pytest.raises(EvaltrailError, match=match):
        _generation(**knobs)


def test_gumbel_max_draws_follow_the_softmax_and_replay_from_the_seed():
    row = np.log(np.array([0.5, 0.3, 0.15, 0.05], dtype=np.float32))
    rng = np.random.default_rng(7)
    draws = np.bincount([draw_token(row, 1.0, rng) for _ in range(20000)], minlength=4) / 20000
    assert np.abs(draws - [0.5, 0.3, 0.15, 0.05]).max() < 0.015
    cold = [draw_token(row, 0.01, np.random.default_rng(s)) for s in range(50)]
    assert set(cold) == {0}  # near zero temperature: the argmax
    replay = [draw_token(row, 1.0, np.random.default_rng(3)) for _ in range(3)]
    assert len(set(replay)) == 1


@pytest.mark.skipif(sandbox.available() is not None, reason=f"{sandbox.available()} (.ci/run installs it)")
def test_pass_at_k_over_sampled_trials_in_the_sandbox():
    prompt = "def add(a, b):\n"
    test = "def check(candidate):\n    assert candidate(2, 3) == 5\n"
    right, wrong = "    return a + b\n", "    return a - b\n"
    passes = {"p1": 3, "p2": 0, "p3": 10}  # of 10 samples each
    rows = pd.DataFrame(
        [
            {
                "instance_id": iid,
                "trial": t,
                "prompt": prompt,
                "text": right if t < c else wrong,
                "metadata": json.dumps({"test": test, "entry_point": "add"}),
            }
            for iid, c in passes.items()
            for t in range(10)
        ]
    )
    at1 = get_metric("pass_at_1")(rows).groupby(level="instance_id").mean()
    assert at1.to_dict() == {"p1": 0.3, "p2": 0.0, "p3": 1.0}
    at5 = get_metric("pass_at_5")(rows)
    assert list(at5.index) == [("p1", 0), ("p2", 0), ("p3", 0)]  # one value per instance
    assert at5.to_list() == pytest.approx([1 - comb(7, 5) / comb(10, 5), 0.0, 1.0])
    assert get_metric("pass_at_100")(rows).empty  # 10 samples cannot estimate pass@100


def test_sampled_generation_is_seeded_and_independent_of_its_company(smollm_gguf):
    from evaltrail.backends import load_backend

    sha = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    cfg = ModelConfig(
        name="smollm2_135m_instruct", backend="llama_cpp", weights={"sha256": sha, "parts": []}, n_ctx=512, n_batch=64
    )
    backend = load_backend(cfg, smollm_gguf, sha)
    prompt = "def fibonacci(n):\n"

    def drawn(items):
        return {i: (a["text"], a["token_logprobs"], a["is_greedy"]) for i, a in backend.generate_many(items)}

    items = [(prompt, 24, ["\n\n"], {"temperature": 0.8, "seed": s}) for s in range(4)]
    items += [("The capital of France is", 12, [], None)]  # a greedy neighbour in the same call
    together = drawn(items)
    assert [together[i] == drawn([items[i]])[0] for i in range(len(items))] == [True] * len(items)
    assert len({together[i][0] for i in range(4)}) > 1  # different seeds, different samples
    assert all(not together[i][2] for i in range(4)) and together[4][2]
    greedy = backend.generate(prompt, 24, ["\n\n"])
    cold = backend.generate(prompt, 24, ["\n\n"], sampling={"temperature": 1e-4, "seed": 0})
    assert cold["text"] == greedy["text"] and cold["token_logprobs"] == greedy["token_logprobs"]
