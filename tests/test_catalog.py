"""`evaltrail scenarios` lists every conf; `evaltrail scenario check` passes for each on real data."""

from __future__ import annotations

import pytest

from evaltrail.catalog import catalog_rows, check_scenario, conf_names
from evaltrail.cli import main
from evaltrail.errors import EvaltrailError

from .conftest import ROOT, need_url_sources

CONF = ROOT / "conf"
NAMES = conf_names(CONF)


def test_catalogue_lists_at_least_14_scenarios_with_taxonomy(capsys):
    rows = catalog_rows(CONF)
    assert len(rows) >= 14 and [r["name"] for r in rows] == NAMES
    assert all(r["group"] and r["task"] and r["language"] and r["license"] for r in rows)
    assert main(["scenarios", "--conf", str(CONF)]) == 0
    out = capsys.readouterr().out
    assert f"{len(rows)} scenarios" in out and "hellaswag" in out


@pytest.mark.parametrize("name", NAMES)
def test_scenario_check_passes(name):
    need_url_sources(name)
    lines = check_scenario(name, CONF)
    assert any(line.startswith("ok  adapter:") for line in lines) and all(line.startswith("ok") for line in lines)


def test_check_names_the_problem(tmp_path):
    bad = tmp_path / "conf"
    (bad / "scenario").mkdir(parents=True)
    (bad / "config.yaml").write_text((CONF / "config.yaml").read_text())
    (bad / "suite").mkdir()
    (bad / "suite" / "default.yaml").write_text("# @package _global_\n")
    text = (CONF / "scenario" / "hellaswag.yaml").read_text().replace("license: MIT", "license: null")
    (bad / "scenario" / "hellaswag.yaml").write_text(text)
    with pytest.raises(EvaltrailError, match="hellaswag.yaml: license is missing"):
        check_scenario("hellaswag", bad)
    with pytest.raises(EvaltrailError, match="no such scenario|Could not find"):
        check_scenario("nope", bad)
