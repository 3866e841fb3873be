"""`evaltrail verify` on a tiny real cell: MMLU-format prompts built by the real adapter, answered by
SmolLM2 through the real infer stage, then recomputed in a scratch cache and compared."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import struct
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from evaltrail.adapters import get_adapter
from evaltrail.backends import model_identity
from evaltrail.cli import main
from evaltrail.config import load_params
from evaltrail.errors import EvaltrailError
from evaltrail.hashing import canonical_json, sha256_file
from evaltrail.io import write_json, write_parquet, write_text
from evaltrail.paths import completions_path, model_info_path, model_path, prompts_path, verify_path
from evaltrail.provenance.verify import (
    IDENTITY_KEY,
    Agreement,
    Mismatch,
    Verification,
    agreement,
    distinct_requests,
    draw,
)
from evaltrail.schema import Reference, make_instance, prompts_table

from .conftest import ROOT
from .pipeline import sh

SMOLLM = "smollm2_135m_instruct"
CELL = ("--scenario", "mmlu", "--model", SMOLLM)


def _params() -> dict:
    """The committed params.yaml cut down to mmlu x SmolLM2, 2-shot, no perturbations; one thread,
    since llama.cpp's spinning threads crawl on a shared 2-core machine."""
    full = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    mmlu = {**full["scenario"]["mmlu"], "num_shots": 2, "perturbations": []}
    return {
        **full,
        "scenarios": ["mmlu"],
        "models": [SMOLLM],
        "bootstrap_samples": 200,
        "scenario": {"mmlu": mmlu},
        "model": {SMOLLM: {**full["model"][SMOLLM], "n_threads": 1}},
    }


def _instances() -> dict[str, list]:
    meta = {"subject": "physics", "subject_name": "physics"}

    def q(split, text, options, gold):
        return make_instance(split, text, [Reference(o, i == gold) for i, o in enumerate(options)], meta)

    return {
        "dev": [
            q(
                "dev",
                "Which force keeps planets in orbit around the Sun?",
                ["Friction", "Gravity", "Magnetism", "Tension"],
                1,
            ),
            q("dev", "What is the SI unit of electric charge?", ["Coulomb", "Volt", "Ampere", "Ohm"], 0),
            q("dev", "What is the boiling point of water at sea level?", ["50 C", "80 C", "100 C", "150 C"], 2),
        ],
        "test": [
            q("test", "Which particle carries a negative charge?", ["Proton", "Neutron", "Electron", "Quark"], 2),
            q("test", "What is the speed of light in vacuum?", ["3e8 m/s", "3e5 m/s", "340 m/s", "1 m/s"], 0),
            q("test", "Which quantity is measured in joules?", ["Power", "Energy", "Mass", "Time"], 1),
        ],
    }


def _hashes(d: Path) -> dict[str, str]:
    return {p.name: sha256_file(p) for p in sorted(d.iterdir())}


@pytest.fixture(scope="module")
def cell(tmp_path_factory, smollm_gguf):
    """A workspace holding params.yaml, the prompts, models/<SmolLM2>/ and the completions the real
    infer stage wrote; the user's request cache (which infer filled) beside it, in the environment."""
    root = tmp_path_factory.mktemp("verify")
    repo, user_cache = root / "repo", root / "user-cache"
    repo.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(repo)
        mp.setenv("EVALTRAIL_CACHE", str(user_cache))
        write_text("params.yaml", yaml.safe_dump(_params(), sort_keys=False))
        run = load_params()
        cfg = run.scenario["mmlu"]
        write_parquet(prompts_path("mmlu"), prompts_table(get_adapter(cfg.method).build(cfg, run, _instances())))
        model_path(SMOLLM).parent.mkdir(parents=True)
        model_path(SMOLLM).symlink_to(smollm_gguf)
        write_json(
            model_info_path(SMOLLM),
            {
                "name": SMOLLM,
                "backend": "llama_cpp",
                "sha256": run.model[SMOLLM].weights["sha256"],
                "sliding_window": 0,
            },
        )
        sh(repo, sys.executable, str(ROOT / "stages" / "configure.py"))  # the infer stage reads its slice
        sh(repo, sys.executable, str(ROOT / "stages" / "infer.py"), "mmlu", SMOLLM)
        yield repo, user_cache


def verify(capsys, *args: str) -> tuple[int, list[str]]:
    code = main(["verify", *CELL, *args])
    return code, capsys.readouterr().out.strip().splitlines()


@contextlib.contextmanager
def committed(mutate=None, identity: dict | None = None):
    """The committed completions rewritten for one test (rows mutated, identity recorded), then restored."""
    path = completions_path("mmlu", SMOLLM)
    original = path.read_bytes()
    table = pq.read_table(path)
    rows = table.to_pylist()
    if mutate:
        mutate(rows)
    meta = dict(table.schema.metadata or {})
    if identity is not None:
        meta[IDENTITY_KEY] = canonical_json(identity).encode()
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema.with_metadata(meta)), path)
    try:
        yield
    finally:
        path.write_bytes(original)


def _sample(size: int) -> list[str]:
    return draw(distinct_requests(pd.read_parquet(prompts_path("mmlu"))), size, 0)


def _method(rid: str) -> str:
    frame = pd.read_parquet(prompts_path("mmlu"))
    return frame.set_index("request_id").loc[rid, "method"]


def test_sample_ignores_row_order_and_duplicate_contents(cell):
    frame = pd.read_parquet(prompts_path("mmlu"))
    ids = distinct_requests(frame)
    assert len(ids) == len(frame) == 15  # 3 questions x (generate + 4 letter probes)
    twin = frame.iloc[[0]].assign(request_id="0" * 16, trial=1)  # same content under another id
    shuffled = pd.concat([frame, twin]).sample(frac=1, random_state=3)
    assert distinct_requests(shuffled) == sorted(set(ids) - {frame["request_id"].iloc[0]} | {"0" * 16})
    assert draw(ids, 4, 0) == draw(distinct_requests(frame.iloc[::-1]), 4, 0) != draw(ids, 4, 1)
    assert len(draw(ids, 4, 0)) == 4 and draw(ids, 100, 0) == ids


def test_verify_passes_without_reading_or_writing_the_user_cache(cell, capsys):
    repo, user_cache = cell
    # poison every cached answer: a verify that read the user's cache would report them
    with contextlib.closing(sqlite3.connect(user_cache / "requests.sqlite")) as db:
        db.execute("UPDATE completions SET value = json_set(value, '$.text', 'POISON', '$.logprob', 0.0)")
        db.commit()
    before = _hashes(user_cache)
    code, out = verify(capsys, "--sample", "6")
    assert code == 0 and out[-1] == f"verify mmlu x {SMOLLM}: 6/6 identical", out
    assert _hashes(user_cache) == before
    rec = json.loads(verify_path("mmlu", SMOLLM).read_text())
    assert (rec["mode"], rec["ok"], rec["sample_size"], rec["seed"], rec["population"]) == ("identical", True, 6, 0, 15)
    assert rec["local_identity"]["sha256"] == _params()["model"][SMOLLM]["weights"]["sha256"]
    assert rec["checked_at"].endswith("+00:00")
    if rec["committed_identity"] is None:  # infer recorded no identity: said, not hidden
        assert out[0].startswith("note:") and "identity is unknown" in out[0]


def _flip_last_bit(x: float) -> float:
    b = bytearray(struct.pack("<d", x))
    b[0] ^= 1
    return struct.unpack("<d", bytes(b))[0]


@pytest.mark.parametrize("kind", ["token_logprob", "text"])
def test_one_changed_byte_is_named(cell, capsys, kind):
    method = "loglikelihood" if kind == "token_logprob" else "generate"
    target = next(r for r in _sample(6) if _method(r) == method)

    def mutate(rows):
        row = next(r for r in rows if r["request_id"] == target)
        if kind == "text":
            row["text"] = row["text"][:-1] + chr(ord(row["text"][-1]) ^ 1)
        else:
            row["token_logprobs"][0] = _flip_last_bit(row["token_logprobs"][0])

    with committed(mutate):
        changed = {r["request_id"]: r for r in pq.read_table(completions_path("mmlu", SMOLLM)).to_pylist()}[target]
        code, out = verify(capsys, "--sample", "6")
    assert code == 1
    field = "text" if kind == "text" else "token_logprobs[0]"
    value = changed["text"] if kind == "text" else changed["token_logprobs"][0]
    assert out[-1].startswith(
        f"verify mmlu x {SMOLLM}: 1/6 differ; first: request {target}: {field}: committed {value!r}, local "
    ), out
    rec = json.loads(verify_path("mmlu", SMOLLM).read_text())
    assert rec["ok"] is False and rec["first_mismatch"]["request_id"] == target and rec["identical"] == 5


def test_another_identity_reports_agreement(cell, capsys):
    run = load_params()
    info = json.loads(model_info_path(SMOLLM).read_text())
    local = model_identity(run.model[SMOLLM], info)
    other = {**local, "engine": {**local.get("engine", {}), "profile": "avx512-elsewhere"}}
    with committed(identity=other):
        code, out = verify(capsys, "--sample", "2")
    assert code == 0, out
    assert (
        out[0].startswith("identity differs from the committed one: ")
        and "engine.profile (committed 'avx512-elsewhere', local " in out[0]
    )
    assert out[1] == f"verify mmlu x {SMOLLM}: 2/2 sampled requests bit-identical (not required across identities)"
    rec = json.loads(verify_path("mmlu", SMOLLM).read_text())
    ag = rec["agreement"]
    # the sampled requests' instances, every request of each recomputed: all predictions agree here
    assert ag["same_predictions"] == ag["predictions"] == 2 * ag["instances"] and ag["delta"] == 0.0
    assert out[2] == (
        f"agreement over {ag['instances']} instances: {ag['predictions']}/{ag['predictions']} "
        f"predictions identical, {ag['logprobs']}/{ag['logprobs']} logprobs within 1e-06"
    )
    assert out[3] == "exact_match delta (local - committed): +0.0000 [95% CI +0.0000, +0.0000]: reproduced within noise"
    assert rec["mode"] == "agreement" and rec["reproduced"] is True and "engine.profile" in rec["identity_diff"]


def test_agreement_flags_a_shifted_metric(cell):
    """Committed answers all right, local ones all wrong: the paired CI excludes 0."""
    prompts = pd.read_parquet(prompts_path("mmlu"))
    rows = {r["request_id"]: r for r in pq.read_table(completions_path("mmlu", SMOLLM)).to_pylist()}
    gold = {
        p.request_id: " " + "ABCD"[[r["correct"] for r in p.references].index(True)]
        for p in prompts.itertuples()
        if p.method == "generate"
    }
    right = {k: {**v, "text": gold[k]} if k in gold else v for k, v in rows.items()}
    wrong = {k: {**v, "text": " D" if gold[k] != " D" else " A"} if k in gold else v for k, v in rows.items()}
    ag = agreement(prompts, right, wrong, load_params().scenario["mmlu"], 200, 0)
    assert (ag.instances, ag.predictions, ag.same_predictions) == (3, 6, 3)  # the letter probes still agree
    assert (ag.delta, ag.ci_low, ag.ci_high, ag.reproduced) == (-1.0, -1.0, -1.0, False)


def test_missing_inputs_and_foreign_completions_are_one_line_errors(cell, tmp_path, monkeypatch, capsys):
    repo, _ = cell
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_bytes((repo / "params.yaml").read_bytes())
    done = completions_path("mmlu", SMOLLM)
    done.parent.mkdir(parents=True)
    done.write_bytes((repo / done).read_bytes())
    assert main(["verify", *CELL]) == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: data/prompts/mmlu.parquet: missing; run `dvc repro prepare@mmlu fetch_model@{SMOLLM}` (or `dvc pull`)"
    ]
    stage = f"infer@mmlu-{SMOLLM}"
    write_text(
        "dvc.lock",
        yaml.safe_dump({"schema": "2.0", "stages": {stage: {"outs": [{"path": str(done), "md5": "0" * 32}]}}}),
    )
    assert main(["verify", *CELL]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {done}: md5 ") and f"dvc checkout {done}" in err[0]


def test_report_shows_each_cells_last_verification(tmp_path):
    from evaltrail.report import build_report

    from .test_report import make_inputs

    make_inputs(tmp_path)
    base = dict(
        seed=0,
        population=15,
        committed_identity=None,
        local_identity={"sha256": "a" * 64},
        agreement=None,
        checked_at="2025-01-02T03:04:05+00:00",
    )
    ok = Verification(
        "mmlu", "alpha_model", sample=("r1", "r2"), identity_diff=(), identical=2, first_mismatch=None, **base
    )
    bad = Verification(
        "hellaswag",
        "alpha_model",
        sample=("r1", "r2"),
        identity_diff=(),
        identical=1,
        first_mismatch=Mismatch("<b>r2</b>", "text", " A", " B"),
        **base,
    )
    ag = Verification(
        "mmlu",
        "beta_model",
        sample=("r1",),
        identity_diff=("engine.profile",),
        identical=0,
        first_mismatch=None,
        **{
            **base,
            "committed_identity": {"engine": {"profile": "x"}},
            "agreement": Agreement(1, 2, 2, 4, 3, "exact_match", 0.0, -0.5, 0.5),
        },
    )
    for v in (ok, bad, ag):
        write_json(tmp_path / verify_path(v.scenario, v.model), v.record())
    with contextlib.chdir(tmp_path):
        page = Path(build_report(load_params()).index).read_text(encoding="utf-8")
    assert "verified 2/2 identical on 2025-01-02 (committed identity unknown)" in page
    assert "1/2 differ on 2025-01-02 (first: request &lt;b&gt;r2&lt;/b&gt;, text)" in page and "<b>r2" not in page
    assert (
        "agreement 2/2 predictions, exact_match delta +0.000 [-0.500, +0.500]: reproduced within noise on 2025-01-02"
    ) in page
    write_json(tmp_path / verify_path("hellaswag", "beta_model"), {"mode": "identical"})
    with (
        contextlib.chdir(tmp_path),
        pytest.raises(EvaltrailError, match=r"beta_model\.json: not an `evaltrail verify`"),
    ):
        build_report(load_params())
