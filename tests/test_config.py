"""params.yaml is exactly what Hydra composes from conf/, and bad keys fail by name."""

from __future__ import annotations

import os

import pytest
import yaml
from dvc.utils.hydra import compose_and_dump

from evaltrail.config import load_params, model_config, parse_params, scenario_config
from evaltrail.errors import EvaltrailError

from .conftest import ROOT


def compose(tmp_path, overrides=()):
    out = tmp_path / "params.yaml"
    compose_and_dump(str(out), str(ROOT / "conf"), None, "config", os.getcwd(), list(overrides))
    return out


def test_committed_params_equal_fresh_composition(tmp_path):
    fresh = compose(tmp_path)
    assert fresh.read_text() == (ROOT / "params.yaml").read_text(), \
        "params.yaml is stale: run `dvc exp run` (or compose conf/) and commit it"


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
