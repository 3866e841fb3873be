"""Shared answers: `evaltrail cache export` / `import` over real request caches, prompts and identities."""

from __future__ import annotations

import hashlib
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from evaltrail.cli import main
from evaltrail.config import load_params
from evaltrail.hashing import canonical_json
from evaltrail.io import write_json, write_parquet
from evaltrail.models.answers import (ANSWERS_SCHEMA, ImportResult, export_answers, import_answers, local_identity,
                                      read_answers)
from evaltrail.models.cache import RequestCache, cache_key
from evaltrail.models.infer import _CONTENT, _content, run_requests
from evaltrail.paths import cache_dir, model_info_path, prompts_path
from evaltrail.schema import Reference, make_instance, make_request, prompts_table

SHA = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
SCENARIO = {"method": "multiple_choice_separate", "eval_split": "test", "metrics": ["acc"], "main_metric": "acc",
            "sources": []}
PARAMS = {"seed": 0, "max_eval_instances": None, "bootstrap_samples": 10, "scenarios": ["alpha", "beta"],
          "models": ["smol"], "mlflow": {}, "scenario": {"alpha": SCENARIO, "beta": SCENARIO},
          "model": {"smol": {"backend": "llama_cpp", "weights": {"sha256": SHA, "parts": []}, "n_ctx": 512,
                             "n_batch": 64}}}


def _prompts(questions):
    pairs = []
    for q, opts in questions:
        inst = make_instance("test", q, [Reference(o, i == 0) for i, o in enumerate(opts)])
        pairs += [(inst, make_request(inst.instance_id, 0, "loglikelihood", q, continuation=" " + o, choice_index=i))
                  for i, o in enumerate(opts)]
        pairs.append((inst, make_request(inst.instance_id, 0, "generate", q, max_tokens=3, stop=("\n",))))
    pairs.append((inst, make_request(inst.instance_id, 0, "loglikelihood_rolling", q)))
    return prompts_table(pairs)


def _answer(content: dict, i: int) -> dict:
    """An answer shaped like the llama_cpp backend's, with full-precision floats."""
    lps = [-0.1 * (i + 1) / 3, -1 / 7 - i]
    answer = {"text": f" white{i}" if content["method"] == "generate" else None, "logprob": sum(lps),
              "is_greedy": None if content["method"] == "loglikelihood_rolling" else i % 2 == 0,
              "token_logprobs": lps, "num_prompt_tokens": 3 + i, "num_output_tokens": 2, "num_evaluated_tokens": 5,
              "truncated_tokens": 0, "runtime_s": 0.012345678901 * (i + 1)}
    if content["method"] != "loglikelihood_rolling":
        answer["rendered_prompt"] = None
    return answer


@pytest.fixture
def repo(in_tmp):
    """A workspace as prepare and fetch_model leave it (params.yaml, prompts, model.json), and a
    request cache holding every request of alpha and all but one of beta (beta sends two of alpha's requests too)."""
    (in_tmp / "params.yaml").write_text(yaml.safe_dump(PARAMS))
    write_parquet(prompts_path("alpha"), _prompts([("Bees make", ["honey", "steel"]), ("Snow is", ["white", "loud"])]))
    write_parquet(prompts_path("beta"), _prompts([("Bees make", ["honey"]), ("Grass is", ["green", "blue"])]))
    write_json(model_info_path("smol"), {"name": "smol", "sha256": SHA})
    run = load_params()
    cache, identity = RequestCache(cache_dir() / "requests.sqlite"), local_identity(run, "smol")
    for scenario in ("alpha", "beta"):
        prompts = pq.read_table(prompts_path(scenario)).to_pandas()
        contents = [_content(r) for r in prompts[_CONTENT].itertuples(index=False)]
        for i, content in enumerate(contents):
            if not (scenario == "beta" and i == len(contents) - 1):  # beta's rolling request: never computed
                cache.put(cache_key(identity, content), _answer(content, i))
    return run, cache


def _all(cache: RequestCache) -> dict[str, str]:
    return {k: v for k, v in cache.conn.execute("SELECT key, value FROM completions")}


def _edit(path, fn) -> None:
    """Rewrite an answers file row by row (fn returns the new row)."""
    rows = [fn(r) for r in pq.read_table(path).to_pylist()]
    write_parquet(path, pa.Table.from_pylist(rows, schema=ANSWERS_SCHEMA))


def _sealed(row: dict, identity=None, answer=None) -> dict:
    """The row as an honest export elsewhere would write it: key and checksum match the new content."""
    identity = json.loads(row["identity"]) if identity is None else identity
    text = row["answer"] if answer is None else canonical_json(answer)
    return {**row, "key": cache_key(identity, json.loads(row["request"])), "identity": canonical_json(identity),
            "answer": text, "answer_sha256": hashlib.sha256(text.encode()).hexdigest()}


def test_export_is_deterministic_sorted_zstd_and_computes_nothing(repo, tmp_path):
    run, cache = repo
    result = export_answers(run, cache, tmp_path / "a.parquet")
    export_answers(run, cache, tmp_path / "b.parquet")
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    assert [(c.scenario, c.model, c.requests, c.missing) for c in result.cells] == [("alpha", "smol", 7, 0),
                                                                                   ("beta", "smol", 6, 1)]
    table = pq.read_table(tmp_path / "a.parquet")
    assert table.schema == ANSWERS_SCHEMA and table.num_rows == result.rows == len(_all(cache)) == 7 + 6 - 2 - 1
    assert table.column("key").to_pylist() == sorted(_all(cache))
    assert pq.ParquetFile(tmp_path / "a.parquet").metadata.row_group(0).column(0).compression == "ZSTD"
    row = table.to_pylist()[0]
    assert json.loads(row["identity"]) == local_identity(run, row["model"])
    assert row["key"] == cache_key(json.loads(row["identity"]), json.loads(row["request"]))
    assert len(_all(cache)) == 10  # nothing computed, nothing added


def test_import_into_an_empty_cache_is_bit_identical(repo, tmp_path):
    run, cache = repo
    export_answers(run, cache, tmp_path / "a.parquet")
    fresh = RequestCache(tmp_path / "other" / "requests.sqlite")
    table = read_answers(tmp_path / "a.parquet")
    assert import_answers(table, run, fresh) == ImportResult(imported=10, present=0, conflicts=0, refused=())
    assert _all(fresh).keys() == _all(cache).keys()
    assert fresh.get_many(sorted(_all(cache))) == cache.get_many(sorted(_all(cache)))
    prompts = pq.read_table(prompts_path("alpha")).to_pandas()

    def never():
        raise AssertionError("a model was loaded: an imported answer is missing")
    ident = local_identity(run, "smol")
    assert run_requests(prompts, ident, fresh, never)[0].equals(run_requests(prompts, ident, cache, never)[0])
    assert import_answers(table, run, fresh) == ImportResult(imported=0, present=10, conflicts=0, refused=())


def test_cli_export_then_import_on_another_machine(repo, tmp_path, monkeypatch, capsys):
    out = tmp_path / "answers.parquet"
    assert main(["cache", "export", "--out", str(out), "--scenario", "beta", "--model", "smol"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "1 of 6 requests of beta x smol are not in the cache", f"{out}: 5 answers of 1 cells"]
    monkeypatch.setenv("EVALTRAIL_CACHE", str(tmp_path / "elsewhere"))
    assert main(["cache", "import", str(out)]) == 0
    assert capsys.readouterr().out == (f"{out}: imported 5, already present 0, conflicting 0 (the cached answer "
                                       f"is kept), refused 0\n")


def test_edited_rows_are_refused_and_the_rest_imported(repo, tmp_path, capsys):
    run, cache = repo
    out = tmp_path / "answers.parquet"
    export_answers(run, cache, out)
    first, second = pq.read_table(out).column("key").to_pylist()[:2]
    edits = {first: lambda r: {**r, "answer": canonical_json({**json.loads(r["answer"]), "logprob": 0.0})},
             second: lambda r: {**r, "request": canonical_json({**json.loads(r["request"]), "prompt": "Cats make"})}}
    _edit(out, lambda r: edits.get(r["key"], lambda r: r)(r))
    fresh = RequestCache(tmp_path / "other.sqlite")
    result = import_answers(read_answers(out), run, fresh)
    assert (result.imported, [r.rows for r in result.refused]) == (8, [2])
    assert result.refused[0].reason == ("edited after export (the answer does not match its sha256; "
                                        "the key does not match identity + request)")
    assert first not in _all(fresh) and second not in _all(fresh)


def test_answers_of_another_engine_are_refused_in_one_line(repo, tmp_path, monkeypatch, capsys):
    run, cache = repo
    out = tmp_path / "answers.parquet"
    export_answers(run, cache, out)
    local = local_identity(run, "smol")
    # the same sdist built with AVX-512 kernels: another engine identity
    avx512 = {**local, "engine": {**local["engine"], "profile": "native-x86_64", "sha256": "f" * 64}}
    keep = pq.read_table(out).column("key").to_pylist()[0]
    _edit(out, lambda r: r if r["key"] == keep else _sealed(r, identity=avx512))
    monkeypatch.setenv("EVALTRAIL_CACHE", str(tmp_path / "elsewhere"))
    assert main(["cache", "import", str(out)]) == 1
    captured = capsys.readouterr()
    [line] = captured.err.splitlines()
    assert line.startswith(f"refused 9 rows of {out}: computed by another engine/model identity (smol: engine")
    assert line.endswith("; import them on a machine with that engine or recompute")
    assert "imported 1, already present 0, conflicting 0 (the cached answer is kept), refused 9" in captured.out
    assert list(_all(RequestCache(cache_dir() / "requests.sqlite"))) == [keep]


def test_answers_that_are_not_completions_are_refused(repo, tmp_path):
    run, cache = repo
    out = tmp_path / "answers.parquet"
    export_answers(run, cache, out)
    rows = pq.read_table(out).to_pylist()
    generate = next(r for r in rows if json.loads(r["request"])["method"] == "generate")
    loglik = next(r for r in rows if json.loads(r["request"])["method"] == "loglikelihood")
    answer = json.loads(loglik["answer"])
    bad = {generate["key"]: {**json.loads(generate["answer"]), "text": None},
           loglik["key"]: {k: v for k, v in answer.items() if k != "text"}}
    others = [r["key"] for r in rows if r["key"] not in bad][:3]
    bad.update(zip(others, [{}, {**answer, "token_logprobs": ["-0.5"]}, {**answer, "num_prompt_tokens": True}]))
    _edit(out, lambda r: _sealed(r, answer=bad[r["key"]]) if r["key"] in bad else r)
    result = import_answers(read_answers(out), run, RequestCache(tmp_path / "other.sqlite"))
    assert result.imported == 5 and [r.rows for r in result.refused] == [5]
    reason = result.refused[0].reason  # four distinct problems, the commonest first ({} also lacks text)
    assert reason.startswith("the answer is not a completion (no 'text'; ") and reason.endswith("; 1 more)")
    assert set(reason[len("the answer is not a completion (no 'text'; "):-len("; 1 more)")].split("; ")) < {
        "a generation without text", "'token_logprobs' is not list<item: double>", "'num_prompt_tokens' is not int32"}
    assert not bad.keys() & _all(RequestCache(tmp_path / "other.sqlite")).keys()


def test_unknown_model_is_refused_by_name(repo, tmp_path):
    run, cache = repo
    out = tmp_path / "answers.parquet"
    export_answers(run, cache, out)
    _edit(out, lambda r: {**r, "model": "gone"})
    result = import_answers(read_answers(out), run, RequestCache(tmp_path / "other.sqlite"))
    assert result.imported == 0 and result.refused[0].rows == 10
    assert result.refused[0].reason == ("no local identity of their model to check them against "
                                        "(unknown model 'gone' in params.yaml; valid: smol)")


def test_a_cached_answer_is_never_overwritten(repo, tmp_path):
    run, cache = repo
    out = tmp_path / "answers.parquet"
    export_answers(run, cache, out)
    key = sorted(_all(cache))[0]
    own = {**cache.get_many([key])[key], "runtime_s": 9.5}  # the same request, timed on this machine
    mine = RequestCache(tmp_path / "mine.sqlite")
    mine.put(key, own)
    table = read_answers(out)
    assert import_answers(table, run, mine) == ImportResult(imported=9, present=0, conflicts=1, refused=())
    assert import_answers(table, run, mine) == ImportResult(imported=0, present=9, conflicts=1, refused=())
    assert mine.get_many([key])[key] == own


@pytest.mark.parametrize("content, error", [
    (b"not parquet at all", "not a readable Parquet file ("), (None, "not found"),
    ("columns", "no column 'scenario'; not a file of `evaltrail cache export`")])
def test_unreadable_input_exits_2_with_one_error_line(repo, tmp_path, capsys, content, error):
    path = tmp_path / "answers.parquet"
    if content == "columns":
        write_parquet(path, pa.table({"key": ["k"]}))
    elif content is not None:
        path.write_bytes(content)
    assert main(["cache", "import", str(path)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: {path}: {error}")
