"""Small CLI commands over the committed run."""

from __future__ import annotations

from evaltrail.cli import main
from evaltrail.io import read_json

from .conftest import ROOT


def test_costs_lists_each_cell_of_the_committed_run(capsys, tmp_path, monkeypatch):
    """`evaltrail costs` on the committed default run: a row per cell from results/costs, the total."""
    monkeypatch.chdir(ROOT)
    out = tmp_path / "costs.md"
    assert main(["costs", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert text == out.read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| scenario")]
    cost = read_json(ROOT / "results/costs/mmlu/smollm2_135m_instruct.json")
    mmlu = next(r for r in rows if r.startswith("| mmlu | smollm2_135m_instruct |"))
    assert f"| {cost['requests']:,} | {cost['computed']:,} | {cost['measured']['model_s']:,.0f} |" in mmlu
    assert "x86_64_avx2 `8dca38ee0c35`" in mmlu and " AVX2 " in mmlu
    assert rows[-1].startswith("| **all** |") and len(rows) == 5


def test_costs_name_the_machine_that_measured_them():
    """The CPU each cell was measured on heads the table; the total sums model seconds and wall."""
    from evaltrail.costs import costs_markdown, cpu_name

    cell = {"requests": 10, "computed": 4, "wall_s": 30.0, "measured": {"model_s": 25.0}, "cpu": cpu_name()}
    text = costs_markdown({("piqa", "m"): cell, ("arc_easy", "m"): {**cell, "cpu": "Other CPU, 8 logical cores"}})
    assert text.startswith(f"Measured on: {'; '.join(sorted([cpu_name(), 'Other CPU, 8 logical cores']))}.\n\n")
    assert text.splitlines()[-1] == "| **all** | | | | 50 | 60 | | | |"
    assert costs_markdown({("piqa", "m"): {k: v for k, v in cell.items() if k != "cpu"}}).startswith("| scenario")
