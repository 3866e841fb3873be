"""The hf backend on a real (tiny, randomly initialized) transformers model saved to a local
directory, tokenizer included: loglikelihoods and greedy generations equal a direct computation
with transformers, and a changed directory is refused."""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch", reason="the hf extra is not installed")
transformers = pytest.importorskip("transformers", reason="the hf extra is not installed")

from evaltrail.backends import fetch, model_identity, open_model  # noqa: E402
from evaltrail.config import ModelConfig, RunConfig  # noqa: E402
from evaltrail.errors import EvaltrailError  # noqa: E402

pytestmark = pytest.mark.slow  # torch and transformers

TEXT = [
    "The sun is a star.",
    "Bees make honey in the hive.",
    "Snow is cold and white.",
    "Paris is in France.",
    "Question: What do plants need?\nAnswer: water and light",
    "A river flows to the sea.",
] * 20


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    path = tmp_path_factory.mktemp("tiny-gpt2")
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(TEXT, vocab_size=300, min_frequency=1, special_tokens=["<|endoftext|>"])
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<|endoftext|>", eos_token="<|endoftext|>")
    torch.manual_seed(0)
    model = GPT2LMHeadModel(
        GPT2Config(
            vocab_size=len(tok),
            n_positions=128,
            n_embd=32,
            n_layer=2,
            n_head=2,
            bos_token_id=tok.bos_token_id,
            eos_token_id=tok.eos_token_id,
        )
    )
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def config(path) -> ModelConfig:
    return ModelConfig(name="tiny", backend="hf", hf={"path": str(path)}, n_threads=1)


def test_loglikelihood_and_generation_equal_transformers(tiny, tmp_path):
    cfg = config(tiny)
    info = fetch(cfg, tmp_path / "models" / "tiny", tmp_path)
    assert (tmp_path / "models" / "tiny" / "model.json").is_file() and "model.safetensors" in info["files"]
    backend = open_model(cfg, tmp_path / "models" / "tiny", info)
    tok = transformers.AutoTokenizer.from_pretrained(tiny, local_files_only=True)
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny, local_files_only=True).eval()

    got = backend.loglikelihood("Bees make honey in the", " hive.")
    ctx, cont = tok("Bees make honey in the")["input_ids"], tok(" hive.", add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ctx + cont])).logits[0].double(), -1)
    expected = [float(logp[len(ctx) - 1 + i, t]) for i, t in enumerate(cont)]
    assert got["num_output_tokens"] == len(cont) and got["token_logprobs"] == pytest.approx(expected, abs=1e-9)

    gen = backend.generate("The sun is", 6, [])
    ids = tok("The sun is", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        ref = model.generate(ids, max_new_tokens=6, do_sample=False, pad_token_id=tok.eos_token_id)[0, ids.shape[1] :]
    ref = [int(t) for t in ref]
    ref = ref[: ref.index(tok.eos_token_id)] if tok.eos_token_id in ref else ref
    assert gen["text"] == tok.decode(ref, skip_special_tokens=True) and gen["num_output_tokens"] == len(ref)


def test_identity_follows_the_files_and_a_changed_directory_is_refused(tiny, tmp_path):
    import shutil

    copy = shutil.copytree(tiny, tmp_path / "copy")
    cfg = config(copy)
    info = fetch(cfg, tmp_path / "m", tmp_path)
    assert model_identity(cfg, info)["sha256"] == fetch(config(tiny), tmp_path / "m2", tmp_path)["sha256"]
    (copy / "config.json").write_text((copy / "config.json").read_text() + "\n")
    with pytest.raises(
        EvaltrailError, match=r"changed since fetch_model recorded it .* run `dvc repro fetch_model@tiny`"
    ):
        open_model(cfg, tmp_path / "m", info)
    with pytest.raises(EvaltrailError, match=r"model.tiny.hf.path: .* holds no config.json"):
        fetch(dataclasses.replace(cfg, hf={"path": str(tmp_path)}), tmp_path / "m3", tmp_path)


def test_a_real_scenario_runs_through_the_hf_backend(tiny, tmp_path, fetched):
    from evaltrail.adapters import get_adapter
    from evaltrail.backends.cache import RequestCache
    from evaltrail.backends.infer import run_requests
    from evaltrail.metrics.scoring import join, score_frame
    from evaltrail.scenarios import get_scenario
    from evaltrail.schema import prompts_table

    scen, raw = fetched("arc_easy")
    scen = dataclasses.replace(scen, max_eval_instances=3, perturbations=[])
    run = RunConfig(
        seed=0,
        max_eval_instances=3,
        bootstrap_samples=10,
        scenarios=["arc_easy"],
        models=[],
        scenario={"arc_easy": scen},
        model={},
        mlflow={},
    )
    frame = prompts_table(
        get_adapter(scen.method).build(scen, run, get_scenario("arc_easy").load(scen, raw))
    ).to_pandas()
    cfg = config(tiny)
    info = fetch(cfg, tmp_path / "m", tmp_path)
    table, computed = run_requests(
        frame,
        model_identity(cfg, info),
        RequestCache(tmp_path / "r.sqlite"),
        lambda: open_model(cfg, tmp_path / "m", info),
    )
    scores = score_frame(join(frame, table.to_pandas()), scen, get_adapter(scen.method))
    acc = scores[scores["metric"] == "acc"]["value"]
    assert computed == len(frame) and len(acc) == 3 and acc.isin([0.0, 1.0]).all()
