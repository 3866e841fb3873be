"""Each stage reads its slice of params.yaml: dvc.yaml and STAGE_PARAMS agree, a slice holds only
what its stage declares, a params change touches exactly the slices that read it, and a stage that
reads an undeclared key fails naming it."""

from __future__ import annotations

import contextlib
import copy
import json
import re
import subprocess
import sys

import pytest
import yaml

from evaltrail.config import composed_params, parse_params, run_from_conf
from evaltrail.errors import EvaltrailError
from evaltrail.paths import PARAMS_SLICES, params_slice_path
from evaltrail.stage_params import STAGE_PARAMS, load_stage_params, units, write_slices

from .conftest import ROOT


def slices(raw: dict, root) -> dict[str, str]:
    write_slices(raw, root)
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*.json"))}


def test_dvc_yaml_names_each_stage_slice_and_only_configure_reads_params_yaml():
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    assert set(stages) - {"configure"} == set(STAGE_PARAMS)
    assert stages["configure"]["params"] == [{"params.yaml": None}]
    unit = {
        "fetch": "${item}",
        "fetch_model": "${item}",
        "prepare": "${item}",
        "battle": "${key}",
        "rag": "${key}",
        "refusal": "${key}",
        "infer": "${item.scenario}-${item.model}",
        "score": "${item.scenario}-${item.model}",
    }
    for name in STAGE_PARAMS:
        body = stages[name].get("do", stages[name])
        assert "params" not in body, f"{name} declares params.yaml keys; its slice is its params dep"
        deps = [d for d in body["deps"] if str(d).startswith(f"{PARAMS_SLICES}/")]
        assert deps == [params_slice_path(name, unit.get(name)).as_posix()], name


@pytest.mark.parametrize("suite", ["default", "core", "battle", "rag", "safety"])
def test_every_stage_of_a_suite_gets_a_slice_holding_only_its_keys(suite, tmp_path):
    raw = composed_params([f"suite={suite}"], ROOT / "conf")
    parse_params(raw)
    written = slices(raw, tmp_path)
    expected = {params_slice_path(s, u).relative_to(PARAMS_SLICES).as_posix() for s, u, _ in units(raw)}
    assert set(written) == expected
    for rel, text in written.items():
        data = json.loads(text)
        tops = {d.split(".")[0] for d in data["declares"]}
        assert set(data["params"]) <= tops, rel
        for group in ("scenario", "model", "battle", "rag"):  # a unit's slice holds its own entries only
            declared = {d.split(".")[1] for d in data["declares"] if d.startswith(f"{group}.")}
            if group in data["params"] and group not in data["declares"]:
                assert set(data["params"][group]) == declared, rel


def test_a_params_change_touches_only_the_slices_that_read_it(tmp_path):
    raw = composed_params(["suite=default"], ROOT / "conf")
    before = slices(raw, tmp_path / "a")
    changed = copy.deepcopy(raw)
    changed["scenario"]["hellaswag"]["metrics"] = [
        m for m in changed["scenario"]["hellaswag"]["metrics"] if m != "ece_1_bin"
    ]
    after = slices(changed, tmp_path / "b")
    diff = sorted(k for k in before if before[k] != after[k])
    models = raw["models"]
    assert diff == sorted(
        ["aggregate.json", "report.json", "fetch/hellaswag.json", "prepare/hellaswag.json"]
        + [f"score/hellaswag-{m}.json" for m in models]
    )
    # never infer: a metric is computed from stored answers
    assert not [k for k in diff if k.startswith("infer/")]
    seeded = copy.deepcopy(raw)
    seeded["seed"] = raw["seed"] + 1
    after = slices(seeded, tmp_path / "c")
    touched = {k.split("/")[0] for k in before if before[k] != after[k]}
    assert touched == {"prepare", "score", "aggregate.json"}


def test_a_stage_reading_an_undeclared_key_fails_naming_it(tmp_path):
    raw = composed_params(["suite=default"], ROOT / "conf")
    with contextlib.chdir(tmp_path):
        write_slices(raw, PARAMS_SLICES)
        run = load_stage_params("infer", f"hellaswag-{raw['models'][0]}")
        assert run.model[raw["models"][0]].n_ctx > 0  # declared: readable
        for read in (
            lambda: run.seed + 1,
            lambda: run.scenario["hellaswag"],
            lambda: list(run.scenarios),
            lambda: f"{run.bootstrap_samples}",
        ):
            with pytest.raises(
                EvaltrailError,
                match=r"stage infer reads params key '\w+', which its slice does "
                r"not hold; add it to STAGE_PARAMS\['infer'\]",
            ):
                read()
        with pytest.raises(EvaltrailError, match=r"infer 'hellaswag-nope' is not a stage of params.yaml"):
            load_stage_params("infer", "hellaswag-nope")


def test_configure_refuses_bad_params_and_keeps_the_slices(tmp_path):
    """configure checks params.yaml whole: one error line, exit 1, the earlier slices untouched."""
    raw = composed_params(["suite=default"], ROOT / "conf")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    env_cmd = [sys.executable, str(ROOT / "stages/configure.py")]
    ok = subprocess.run(env_cmd, cwd=tmp_path, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert re.fullmatch(r"configure: \d+ stage slices of params.yaml -> data/params/\n", ok.stdout)
    before = {p: p.read_bytes() for p in (tmp_path / PARAMS_SLICES).rglob("*") if p.is_file()}
    raw["battle"] = {"hellaswag": {"judge": "nope"}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    bad = subprocess.run(env_cmd, cwd=tmp_path, capture_output=True, text=True)
    assert bad.returncode == 1
    assert len(bad.stderr.strip().splitlines()) == 1 and bad.stderr.startswith("error: params.yaml: battle.hellaswag")
    assert {p: p.read_bytes() for p in (tmp_path / PARAMS_SLICES).rglob("*") if p.is_file()} == before


def test_a_stage_sees_the_same_config_through_its_slice(tmp_path):
    """What a stage reads from its slice equals what the whole params.yaml says."""
    raw = composed_params(["suite=default"], ROOT / "conf")
    whole = run_from_conf(["suite=default"], ROOT / "conf")
    with contextlib.chdir(tmp_path):
        write_slices(raw, PARAMS_SLICES)
        for s in raw["scenarios"]:
            run = load_stage_params("prepare", s)
            assert (run.scenario[s], run.seed, run.max_eval_instances, run.resources) == (
                whole.scenario[s],
                whole.seed,
                whole.max_eval_instances,
                whole.resources,
            )
        ag = load_stage_params("aggregate")
        assert (ag.scenario, ag.model, ag.reproduce, ag.mlflow) == (
            whole.scenario,
            whole.model,
            whole.reproduce,
            whole.mlflow,
        )
