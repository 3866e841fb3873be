"""The bad-input battery, on a copy of a real run: each case makes a stage fail with a one-line
error naming the file or key and the fix, a non-zero exit, and every earlier artifact intact."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .pipeline import copy_workspace, workspace_env

pytestmark = pytest.mark.e2e
SMOLLM = "smollm2_135m_instruct"


def snapshot(ws: Path) -> dict[str, str]:
    """sha256 of every artifact: data/, models/, results/."""
    return {str(p.relative_to(ws)): hashlib.sha256(p.read_bytes()).hexdigest()
            for d in ("data", "models", "results") for p in sorted((ws / d).rglob("*")) if p.is_file()}


def edit_params(ws: Path, change) -> None:
    params = yaml.safe_load((ws / "params.yaml").read_text())
    change(params)
    (ws / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.chmod(0o644)
    path.write_bytes(data[: len(data) // 2])


# case: (what to break, stage command, what the one-line error must contain)
CASES = {
    "truncated raw data file": (
        lambda ws: truncate(ws / "data" / "raw" / "hellaswag" / "validation.arrow"),
        ["prepare.py", "hellaswag"], r"data/raw/hellaswag/validation.arrow: sha256 mismatch.*"),
    "sha256 pin mismatch": (
        lambda ws: edit_params(ws, lambda p: p["scenario"]["hellaswag"]["sources"][0].update(sha256="ab" * 32)),
        ["fetch.py", "hellaswag"], r"scenario.hellaswag.sources.*expected abab.*, got 5d21a8cf"),
    "unknown scenario": (lambda ws: None, ["prepare.py", "nope"], r"unknown scenario 'nope' in params.yaml; valid: .*hellaswag"),
    "unknown model": (lambda ws: None, ["infer.py", "hellaswag", "nope"], r"unknown model 'nope' in params.yaml; valid: "),
    "unknown metric": (
        lambda ws: edit_params(ws, lambda p: p["scenario"]["hellaswag"]["metrics"].append("acc_nrom")),
        ["score.py", "hellaswag", SMOLLM], r"scenario.hellaswag.metrics: unknown metric 'acc_nrom'; valid: .*acc_norm"),
    "malformed YAML": (
        lambda ws: (ws / "params.yaml").write_text((ws / "params.yaml").read_text() + "scenario: [unclosed\n"),
        ["score.py", "hellaswag", SMOLLM], r"params.yaml: not valid YAML \(line \d+"),
    "missing model weights": (
        lambda ws: (ws / "models" / SMOLLM / "weights.gguf").unlink(),
        ["infer.py", "hellaswag", SMOLLM], rf"models/{SMOLLM}/weights.gguf: missing; run `dvc repro fetch_model@{SMOLLM}`"),
    "context window too small": (
        lambda ws: edit_params(ws, lambda p: p["model"][SMOLLM].update(n_ctx=16)),
        ["infer.py", "hellaswag", SMOLLM], rf"model.{SMOLLM}.n_ctx=16 cannot hold a \d+-token continuation.*; raise it"),
    # names and knobs are refused while params.yaml is read (config.py), before a stage writes anything
    "model key is a path": (
        lambda ws: edit_params(ws, lambda p: p["model"].update({"../../../victim": p["model"][SMOLLM]})),
        ["fetch_model.py", "../../../victim"],
        r"params.yaml: model key '\.\./\.\./\.\./victim' is not a snake_case identifier .*; rename it"),
    "negative max_eval_instances": (
        lambda ws: edit_params(ws, lambda p: p.update(max_eval_instances=-1)),
        ["prepare.py", "hellaswag"], r"params.yaml: max_eval_instances: -1; expected null or an integer >= 1"),
    "seed not an integer": (
        lambda ws: edit_params(ws, lambda p: p.update(seed="abc")),
        ["score.py", "hellaswag", SMOLLM], r"params.yaml: seed: 'abc'; expected an integer >= 0"),
    "zero n_batch": (
        lambda ws: edit_params(ws, lambda p: p["model"][SMOLLM].update(n_batch=0)),
        ["fetch_model.py", SMOLLM], rf"params.yaml: model.{SMOLLM}.n_batch: 0; expected null or an integer >= 1"),
    "negative num_shots": (
        lambda ws: edit_params(ws, lambda p: p["scenario"]["hellaswag"].update(num_shots=-3)),
        ["infer.py", "hellaswag", SMOLLM], r"params.yaml: scenario.hellaswag.num_shots: -3; expected an integer >= 0"),
    "n_ctx not an integer": (
        lambda ws: edit_params(ws, lambda p: p["model"][SMOLLM].update(n_ctx="big")),
        ["infer.py", "hellaswag", SMOLLM],
        rf"params.yaml: model.{SMOLLM}.n_ctx: 'big'; expected null or an integer >= 1"),
}


@pytest.fixture(scope="module")
def base(smoke_repo, tmp_path_factory):
    return copy_workspace(smoke_repo, tmp_path_factory.mktemp("bad") / "ws")


@pytest.mark.parametrize("case", CASES)
def test_bad_input_fails_in_one_line_and_keeps_artifacts(case, base, tmp_path):
    import re

    ws = copy_workspace(base, tmp_path / "ws")
    breaks, cmd, expected = CASES[case]
    breaks(ws)
    before = snapshot(ws)
    env = {**os.environ, **workspace_env(ws), "EVALTRAIL_CACHE": str(tmp_path / "cold-cache")}  # nothing cached
    proc = subprocess.run([sys.executable, f"stages/{cmd[0]}", *cmd[1:]], cwd=ws, env=env, capture_output=True, text=True)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and "%|" not in ln and not ln.startswith("llama")]
    assert proc.returncode == 1, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert re.search(expected, lines[0]), lines[0]
    assert snapshot(ws) == before
