"""params.yaml is exactly what Hydra composes from conf/, and bad keys fail by name."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import yaml
from dvc.utils.hydra import compose_and_dump

from evaltrail.config import load_params, model_config, parse_params, run_from_conf, scenario_config, scenario_from_conf
from evaltrail.errors import EvaltrailError

from .conftest import ROOT


def compose(tmp_path, overrides=()):
    out = tmp_path / "params.yaml"
    compose_and_dump(str(out), str(ROOT / "conf"), None, "config", os.getcwd(), list(overrides))
    return out


def test_committed_params_equal_fresh_composition(tmp_path):
    fresh = compose(tmp_path)
    assert fresh.read_text() == (ROOT / "params.yaml").read_text(), (
        "params.yaml is stale: run `dvc exp run` (or compose conf/) and commit it"
    )


def test_derived_lists_follow_selected_groups(tmp_path):
    raw = yaml.safe_load(compose(tmp_path, ["suite=smoke"]).read_text())
    assert raw["scenarios"] == list(raw["scenario"]) == ["mmlu", "hellaswag"]
    assert raw["models"] == ["smollm2_135m_instruct"]
    assert raw["scenario"]["mmlu"]["subjects"] == ["abstract_algebra"]


def test_every_conf_parses_and_validates(tmp_path):
    for suite in ("default", "smoke"):
        run = load_params(compose(tmp_path, [f"suite={suite}"]))
        for name, cfg in run.scenario.items():
            assert cfg.main_metric in cfg.metrics
            assert all("sha256" in s for s in cfg.sources)
        for m in run.model.values():
            assert len(m.weights["sha256"]) == 64


def _raw(tmp_path):
    return yaml.safe_load(compose(tmp_path).read_text())


def test_unknown_key_names_its_path(tmp_path):
    raw = _raw(tmp_path)
    raw["model"]["gemma3_270m"]["n_ctxx"] = 4
    with pytest.raises(EvaltrailError, match=r"model\.gemma3_270m\.n_ctxx: unknown key"):
        parse_params(raw)


def test_missing_key_names_its_path(tmp_path):
    raw = _raw(tmp_path)
    del raw["scenario"]["hellaswag"]["metrics"]
    with pytest.raises(EvaltrailError, match=r"scenario\.hellaswag\.metrics: missing"):
        parse_params(raw)


def test_unknown_names_list_the_valid_ones(tmp_path):
    run = parse_params(_raw(tmp_path))
    with pytest.raises(EvaltrailError, match="valid: hellaswag, mmlu"):
        scenario_config(run, "mmluu")
    with pytest.raises(EvaltrailError, match="valid: gemma3_270m, smollm2_135m_instruct"):
        model_config(run, "gpt")


def test_main_metric_must_be_scored(tmp_path):
    raw = _raw(tmp_path)
    raw["scenario"]["hellaswag"]["main_metric"] = "exact_match"
    with pytest.raises(EvaltrailError, match=r"scenario\.hellaswag\.main_metric: 'exact_match' is not among"):
        parse_params(raw)


# Hardening (issue 21): names and values are refused when params.yaml or conf/ is read, before any
# stage touches the disk; each refusal is one line naming the file, the key and what is accepted.


def files(root) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def run_stage(ws, *argv):
    """A stage CLI from `ws` (only imports: every case here fails while loading params.yaml, which the
    configure stage alone reads)."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "stages" / argv[0]), *argv[1:]], cwd=ws, check=False, capture_output=True, text=True
    )
    return proc.returncode, proc.stderr.splitlines()


@pytest.mark.parametrize(
    "group, key",
    [("model", "../../../victim"), ("model", "a/b"), ("scenario", "Bad-Name"), ("rag", "../rag"), ("battle", "")],
)
def test_names_must_be_snake_case_identifiers(tmp_path, group, key):
    raw = _raw(tmp_path)
    raw[group][key] = {}  # refused by its key alone
    with pytest.raises(
        EvaltrailError,
        match=rf"^params\.yaml: {group} key {re.escape(repr(key))} is not a snake_case "
        rf"identifier \(\[a-z\]\[a-z0-9_\]\*\); rename it$",
    ):
        parse_params(raw)


def test_configure_refuses_a_path_as_model_key_and_touches_nothing(tmp_path):
    raw = _raw(tmp_path)
    raw["model"]["../../../victim"] = raw["model"]["smollm2_135m_instruct"]
    ws = tmp_path / "a" / "ws"  # models/../../../victim is tmp_path/victim
    ws.mkdir(parents=True)
    (ws / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "keep.txt").write_text("not yours")
    before = files(tmp_path)
    code, err = run_stage(ws, "configure.py")
    assert code == 1 and len(err) == 1, err
    assert err[0] == (
        "error: params.yaml: model key '../../../victim' is not a snake_case identifier ([a-z][a-z0-9_]*); rename it"
    )
    assert files(tmp_path) == before


BAD_KNOBS = [  # (where in params.yaml, bad value, the one-line message after "params.yaml: ")
    (("max_eval_instances",), -1, "max_eval_instances: -1; expected null or an integer >= 1"),
    (("max_eval_instances",), 0, "max_eval_instances: 0; expected null or an integer >= 1"),
    (("seed",), "abc", "seed: 'abc'; expected an integer >= 0"),
    (("seed",), True, "seed: True; expected an integer >= 0"),  # YAML's true is no number
    (("seed",), -1, "seed: -1; expected an integer >= 0"),
    (("bootstrap_samples",), 0, "bootstrap_samples: 0; expected an integer >= 1"),
    (("bootstrap_samples",), 2.5, "bootstrap_samples: 2.5; expected an integer >= 1"),
    (("model", "gemma3_270m", "n_batch"), 0, "model.gemma3_270m.n_batch: 0; expected null or an integer >= 1"),
    (("model", "gemma3_270m", "n_ctx"), "big", "model.gemma3_270m.n_ctx: 'big'; expected null or an integer >= 1"),
    (("model", "gemma3_270m", "n_threads"), -2, "model.gemma3_270m.n_threads: -2; expected null or an integer >= 1"),
    (
        ("model", "gemma3_270m", "chat_template"),
        "yes",
        "model.gemma3_270m.chat_template: 'yes'; expected true or false",
    ),
    (("scenario", "mmlu", "num_shots"), -3, "scenario.mmlu.num_shots: -3; expected an integer >= 0"),
    (("scenario", "mmlu", "max_tokens"), 0, "scenario.mmlu.max_tokens: 0; expected null or an integer >= 1"),
    (
        ("scenario", "mmlu", "max_eval_instances"),
        -1,
        "scenario.mmlu.max_eval_instances: -1; expected null or an integer >= 1",
    ),
    (("scenario", "mmlu", "num_train_trials"), 0, "scenario.mmlu.num_train_trials: 0; expected an integer >= 1"),
    (("scenario", "mmlu", "stop"), "\n", r"scenario.mmlu.stop: '\n'; expected a list of strings"),
]


def _set(raw, path, value):
    for k in path[:-1]:
        raw = raw[k]
    raw[path[-1]] = value


@pytest.mark.parametrize("path, value, message", BAD_KNOBS, ids=lambda x: x if isinstance(x, str) else None)
def test_typed_knobs_name_the_key_the_value_and_the_range(tmp_path, path, value, message):
    raw = _raw(tmp_path)
    _set(raw, path, value)
    with pytest.raises(EvaltrailError) as exc:
        parse_params(raw)
    assert str(exc.value) == f"params.yaml: {message}"


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("tie_margin", -0.5, "battle.best_chatgpt_prompts.tie_margin: -0.5; expected a number >= 0"),
        ("tie_margin", float("nan"), "battle.best_chatgpt_prompts.tie_margin: nan; expected a number >= 0"),
        ("penalty_C", 0, "battle.best_chatgpt_prompts.penalty_C: 0; expected null or a number > 0"),
        ("max_tokens", "4", "battle.best_chatgpt_prompts.max_tokens: '4'; expected an integer >= 1"),
    ],
)
def test_judge_knobs_are_checked_too(tmp_path, key, value, message):
    raw = yaml.safe_load(compose(tmp_path, ["suite=battle"]).read_text())
    raw["battle"]["best_chatgpt_prompts"][key] = value
    with pytest.raises(EvaltrailError) as exc:
        parse_params(raw)
    assert str(exc.value) == f"params.yaml: {message}"


SERVED = {"name": "served", "backend": "openai", "server": {"base_url": "http://127.0.0.1:8000/v1", "model": "m"}}
LOCAL_HF = {"name": "local", "backend": "hf", "hf": {"path": "/nowhere"}}


@pytest.mark.parametrize(
    "model, path, value, message",
    [
        (SERVED, ("server", "concurrency"), 0, "model.x.server.concurrency: 0; expected an integer >= 1"),
        (SERVED, ("server", "timeout_s"), 0, "model.x.server.timeout_s: 0; expected a number > 0"),
        (SERVED, ("server", "max_retries"), -1, "model.x.server.max_retries: -1; expected an integer >= 0"),
        (
            SERVED,
            ("server", "base_url"),
            "file:///etc/passwd",
            r"model.x.server.base_url: 'file:///etc/passwd'; expected a string matching https?://[^\s/?#]+(/\S*)?",
        ),
        (SERVED, ("server", "extra_body"), [1], "model.x.server.extra_body: [1]; expected a mapping"),
        (
            SERVED,
            ("server", "modle"),
            "m",
            "model.x.server.modle: unknown key; valid keys: base_url, model, "
            "api_key_env, concurrency, timeout_s, max_retries, extra_body",
        ),
        (
            LOCAL_HF,
            ("hf", "dtype"),
            "float8",
            "model.x.hf.dtype: 'float8'; expected a string: one of float32, float16, bfloat16",
        ),
        (LOCAL_HF, ("hf", "max_length"), 0, "model.x.hf.max_length: 0; expected null or an integer >= 1"),
        (SERVED, ("backend",), "vllm", "model.x.backend: 'vllm'; expected a string: one of llama_cpp, openai, hf"),
    ],
    ids=lambda x: x if isinstance(x, str) else None,
)
def test_served_and_local_model_knobs_are_checked_on_load(tmp_path, model, path, value, message):
    """A served or local transformers model's settings are refused by `validate`, not when infer first runs."""
    raw = _raw(tmp_path)
    model = {k: dict(v) if isinstance(v, dict) else v for k, v in model.items() if k != "name"}
    _set(model, path, value)
    raw["model"]["x"] = model
    raw["models"] = [*raw["models"], "x"]
    with pytest.raises(EvaltrailError) as exc:
        parse_params(raw)
    assert str(exc.value) == f"params.yaml: {message}"


def test_a_name_inside_a_config_must_match_its_key(tmp_path):
    raw = _raw(tmp_path)
    raw["model"]["gemma3_270m"]["name"] = "gemma3_270m"  # the same: accepted
    assert parse_params(raw).model["gemma3_270m"].name == "gemma3_270m"
    raw["model"]["gemma3_270m"]["name"] = "other"
    with pytest.raises(EvaltrailError) as exc:
        parse_params(raw)
    assert str(exc.value) == (
        "params.yaml: model.gemma3_270m.name: 'other' differs from 'gemma3_270m', which its "
        "place in the config sets; remove the key"
    )


def test_validate_and_stages_refuse_a_bad_knob_before_any_disk_work(tmp_path, capsys):
    from evaltrail.cli import main

    raw = _raw(tmp_path)
    raw["max_eval_instances"] = -1  # the probe: -1 silently prepared every instance
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    before = files(tmp_path)
    assert main(["validate", "--params", str(ws / "params.yaml")]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"error: {ws / 'params.yaml'}: max_eval_instances: -1; expected null or an integer >= 1"
    ]
    code, err = run_stage(ws, "configure.py")
    assert code == 1 and err == ["error: params.yaml: max_eval_instances: -1; expected null or an integer >= 1"]
    assert files(tmp_path) == before


def _small_conf(tmp_path, **scenarios):
    """conf/ with config.yaml, an empty default suite and the given scenario files (name -> text)."""
    conf = tmp_path / "conf"
    (conf / "scenario").mkdir(parents=True)
    (conf / "suite").mkdir()
    (conf / "config.yaml").write_text((ROOT / "conf" / "config.yaml").read_text())
    (conf / "suite" / "default.yaml").write_text("# @package _global_\n")
    for name, text in scenarios.items():
        (conf / "scenario" / f"{name}.yaml").write_text(text)
    return conf


BROKEN = "method: generation\nmetrics: [exact_match\nmain_metric: exact_match\n"  # the flow list never closes


def test_malformed_scenario_conf_names_the_file_and_line(tmp_path):
    conf = _small_conf(tmp_path, broken=BROKEN)
    with pytest.raises(
        EvaltrailError,
        match=r"^.*conf/scenario/broken\.yaml: not valid YAML \(line 3, column \d+\): "
        r"[^\n]*; fix it$",
    ):
        scenario_from_conf("broken", conf)
    with pytest.raises(
        EvaltrailError,
        match=r"^.*conf/scenario/\.\./x\.yaml: scenario name '\.\./x' "
        r"is not a snake_case",
    ):
        scenario_from_conf("../x", conf)


def test_malformed_model_conf_names_the_file_and_line(tmp_path):
    import shutil

    conf = tmp_path / "conf"
    shutil.copytree(ROOT / "conf", conf)
    with open(conf / "model" / "gemma3_270m.yaml", "a") as f:
        f.write("n_ctx: 2048\n  oops: [\n")
    with pytest.raises(
        EvaltrailError,
        match=r"^.*conf/model/gemma3_270m\.yaml: not valid YAML "
        r"\(line \d+, column \d+\): mapping values are not allowed here; fix it$",
    ):
        run_from_conf([], conf)


def test_malformed_params_yaml_names_the_line(tmp_path):
    bad = tmp_path / "params.yaml"
    bad.write_text("seed: 0\nscenario: [unclosed\n")
    with pytest.raises(
        EvaltrailError,
        match=r"params\.yaml: not valid YAML \(line 3, column 1\): .*; fix it, or "
        r"recompose it from conf/ with `dvc exp run`$",
    ):
        load_params(bad)
    bad.write_bytes(b"seed: 0\nmodels: [caf\xe9]\n")
    with pytest.raises(EvaltrailError, match=r"params\.yaml:2: not UTF-8 text \(byte 20\); fix it, or recompose"):
        load_params(bad)


def test_scenarios_lists_the_good_confs_and_reports_each_bad_one_in_a_line(tmp_path, capsys):
    from evaltrail.cli import main

    conf = _small_conf(
        tmp_path,
        hellaswag=(ROOT / "conf" / "scenario" / "hellaswag.yaml").read_text(),
        broken=BROKEN,
        **{"Bad-Name": (ROOT / "conf" / "scenario" / "hellaswag.yaml").read_text()},
    )
    before = files(tmp_path)
    assert main(["scenarios", "--conf", str(conf)]) == 1  # listed, but a bad conf fails the command
    out, err = capsys.readouterr()
    assert "hellaswag" in out and out.rstrip().endswith("1 scenarios")
    err = err.splitlines()
    assert len(err) == 2, err
    assert re.fullmatch(
        r"error: .*conf/scenario/Bad-Name\.yaml: scenario name 'Bad-Name' is not a snake_case "
        r"identifier .*; rename it",
        err[0],
    )
    assert re.fullmatch(
        r"error: .*conf/scenario/broken\.yaml: not valid YAML \(line 3, column \d+\): .*; fix it", err[1]
    )
    assert files(tmp_path) == before
