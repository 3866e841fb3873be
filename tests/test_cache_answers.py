"""Shared answers: `evaltrail cache export` / `import` over real request caches, prompts and identities."""

from __future__ import annotations

import hashlib
import json
import sqlite3

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from evaltrail.backends.answers import (
    ANSWERS_SCHEMA,
    ImportResult,
    export_answers,
    import_answers,
    local_identity,
    read_answers,
)
from evaltrail.backends.cache import RequestCache, cache_key, checksum
from evaltrail.backends.infer import _CONTENT, _content, run_requests
from evaltrail.cli import main
from evaltrail.config import load_params
from evaltrail.errors import EvaltrailError
from evaltrail.hashing import canonical_json
from evaltrail.io import write_json, write_parquet
from evaltrail.paths import cache_dir, model_info_path, prompts_path
from evaltrail.schema import Reference, make_instance, make_request, prompts_table

SHA = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
SCENARIO = {
    "method": "multiple_choice_separate",
    "eval_split": "test",
    "metrics": ["acc"],
    "main_metric": "acc",
    "sources": [],
}
PARAMS = {
    "seed": 0,
    "max_eval_instances": None,
    "bootstrap_samples": 10,
    "scenarios": ["alpha", "beta"],
    "models": ["smol"],
    "mlflow": {},
    "scenario": {"alpha": SCENARIO, "beta": SCENARIO},
    "model": {"smol": {"backend": "llama_cpp", "weights": {"sha256": SHA, "parts": []}, "n_ctx": 512, "n_batch": 64}},
}


def _prompts(questions):
    pairs = []
    for q, opts in questions:
        inst = make_instance("test", q, [Reference(o, i == 0) for i, o in enumerate(opts)])
        pairs += [
            (inst, make_request(inst.instance_id, 0, "loglikelihood", q, continuation=" " + o, choice_index=i))
            for i, o in enumerate(opts)
        ]
        pairs.append((inst, make_request(inst.instance_id, 0, "generate", q, max_tokens=3, stop=("\n",))))
    pairs.append((inst, make_request(inst.instance_id, 0, "loglikelihood_rolling", q)))
    return prompts_table(pairs)


def _answer(content: dict, i: int) -> dict:
    """An answer shaped like the llama_cpp backend's, with full-precision floats."""
    lps = [-0.1 * (i + 1) / 3, -1 / 7 - i]
    answer = {
        "text": f" white{i}" if content["method"] == "generate" else None,
        "logprob": sum(lps),
        "is_greedy": None if content["method"] == "loglikelihood_rolling" else i % 2 == 0,
        "token_logprobs": lps,
        "num_prompt_tokens": 3 + i,
        "num_output_tokens": 2,
        "num_evaluated_tokens": 5,
        "truncated_tokens": 0,
        "runtime_s": 0.012345678901 * (i + 1),
    }
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
    write_json(model_info_path("smol"), {"name": "smol", "sha256": SHA, "sliding_window": 0})
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
    return {
        **row,
        "key": cache_key(identity, json.loads(row["request"])),
        "identity": canonical_json(identity),
        "answer": text,
        "answer_sha256": hashlib.sha256(text.encode()).hexdigest(),
    }


def test_export_is_deterministic_sorted_zstd_and_computes_nothing(repo, tmp_path):
    run, cache = repo
    result = export_answers(run, cache, tmp_path / "a.parquet")
    export_answers(run, cache, tmp_path / "b.parquet")
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    assert [(c.scenario, c.model, c.requests, c.missing) for c in result.cells] == [
        ("alpha", "smol", 7, 0),
        ("beta", "smol", 6, 1),
    ]
    table = pq.read_table(tmp_path / "a.parquet")
    assert table.schema == ANSWERS_SCHEMA and table.num_rows == result.rows == len(_all(cache)) == 7 + 6 - 2 - 1
    assert table.column("key").to_pylist() == sorted(_all(cache))
    assert pq.ParquetFile(tmp_path / "a.parquet").metadata.row_group(0).column(0).compression == "ZSTD"
    row = table.to_pylist()[0]
    assert json.loads(row["identity"]) == local_identity(run, row["model"])
    assert row["key"] == cache_key(json.loads(row["identity"]), json.loads(row["request"]))
    assert len(_all(cache)) == 10  # nothing computed, nothing added


def test_export_from_a_cache_without_the_cells_answers_writes_nothing(repo, tmp_path):
    run, _ = repo
    other = RequestCache(tmp_path / "elsewhere" / "requests.sqlite")
    with pytest.raises(EvaltrailError, match=r"none of the 13 requests of alpha x smol, beta x smol is cached there"):
        export_answers(run, other, tmp_path / "a.parquet")
    assert not (tmp_path / "a.parquet").exists()


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
        "1 of 6 requests of beta x smol are not in the cache",
        f"{out}: 5 answers of 1 cells",
    ]
    monkeypatch.setenv("EVALTRAIL_CACHE", str(tmp_path / "elsewhere"))
    assert main(["cache", "import", str(out)]) == 0
    assert capsys.readouterr().out == (
        f"{out}: imported 5, already present 0, conflicting 0 (the cached answer is kept), refused 0\n"
    )


def test_edited_rows_are_refused_and_the_rest_imported(repo, tmp_path, capsys):
    run, cache = repo
    out = tmp_path / "answers.parquet"
    export_answers(run, cache, out)
    first, second = pq.read_table(out).column("key").to_pylist()[:2]
    edits = {
        first: lambda r: {**r, "answer": canonical_json({**json.loads(r["answer"]), "logprob": 0.0})},
        second: lambda r: {**r, "request": canonical_json({**json.loads(r["request"]), "prompt": "Cats make"})},
    }
    _edit(out, lambda r: edits.get(r["key"], lambda r: r)(r))
    fresh = RequestCache(tmp_path / "other.sqlite")
    result = import_answers(read_answers(out), run, fresh)
    assert (result.imported, [r.rows for r in result.refused]) == (8, [2])
    assert result.refused[0].reason == (
        "edited after export (the answer does not match its sha256; the key does not match identity + request)"
    )
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
    bad = {
        generate["key"]: {**json.loads(generate["answer"]), "text": None},
        loglik["key"]: {k: v for k, v in answer.items() if k != "text"},
    }
    others = [r["key"] for r in rows if r["key"] not in bad][:3]
    bad.update(zip(others, [{}, {**answer, "token_logprobs": ["-0.5"]}, {**answer, "num_prompt_tokens": True}]))
    _edit(out, lambda r: _sealed(r, answer=bad[r["key"]]) if r["key"] in bad else r)
    result = import_answers(read_answers(out), run, RequestCache(tmp_path / "other.sqlite"))
    assert result.imported == 5 and [r.rows for r in result.refused] == [5]
    reason = result.refused[0].reason  # four distinct problems, the commonest first ({} also lacks text)
    assert reason.startswith("the answer is not a completion (no 'text'; ") and reason.endswith("; 1 more)")
    assert set(reason[len("the answer is not a completion (no 'text'; ") : -len("; 1 more)")].split("; ")) < {
        "a generation without text",
        "'token_logprobs' is not list<item: double>",
        "'num_prompt_tokens' is not int32",
    }
    assert not bad.keys() & _all(RequestCache(tmp_path / "other.sqlite")).keys()


def test_unknown_model_is_refused_by_name(repo, tmp_path):
    run, cache = repo
    out = tmp_path / "answers.parquet"
    export_answers(run, cache, out)
    _edit(out, lambda r: {**r, "model": "gone"})
    result = import_answers(read_answers(out), run, RequestCache(tmp_path / "other.sqlite"))
    assert result.imported == 0 and result.refused[0].rows == 10
    assert result.refused[0].reason == (
        "no local identity of their model to check them against (unknown model 'gone' in params.yaml; valid: smol)"
    )


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


@pytest.mark.parametrize(
    "content, error",
    [
        (b"not parquet at all", "not a readable Parquet file ("),
        (None, "not found"),
        ("columns", "no column 'scenario'; not a file of `evaltrail cache export`"),
    ],
)
def test_unreadable_input_exits_2_with_one_error_line(repo, tmp_path, capsys, content, error):
    path = tmp_path / "answers.parquet"
    if content == "columns":
        write_parquet(path, pa.table({"key": ["k"]}))
    elif content is not None:
        path.write_bytes(content)
    assert main(["cache", "import", str(path)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: {path}: {error}")


class Answers:
    """A backend answering each request with _answer(content, seed); it records what it computed."""

    def __init__(self, seed: int):
        self.seed, self.computed = seed, []

    def map_requests(self, items, call):
        for key, content in items:
            self.computed.append(key)
            yield key, _answer(content, self.seed)


def _alpha(run) -> tuple:
    """alpha's prompts, the local identity, and its request contents by cache key."""
    prompts, identity = pq.read_table(prompts_path("alpha")).to_pandas(), local_identity(run, "smol")
    contents = [_content(r) for r in prompts[_CONTENT].itertuples(index=False)]
    return prompts, identity, {cache_key(identity, c): c for c in contents}


def _rows(path) -> dict[str, tuple]:
    with sqlite3.connect(path) as db:
        return {k: (v, c) for k, v, c in db.execute("SELECT key, value, checksum FROM completions")}


def test_unsound_rows_are_recomputed_with_one_warning_naming_the_cache(repo, capsys):
    """A generation without text and an empty row (legacy: no checksum) fail the schema check, an
    edited row its checksum: those three are recomputed; a sound legacy row is served as it is."""
    run, cache = repo
    prompts, identity, requests = _alpha(run)
    gens = sorted(k for k, c in requests.items() if c["method"] == "generate")
    lls = sorted(k for k, c in requests.items() if c["method"] == "loglikelihood")
    stored = cache.get_many([gens[0], lls[0]])
    with sqlite3.connect(cache.path) as db:
        db.execute(
            "UPDATE completions SET value = ?, checksum = NULL WHERE key = ?",
            (json.dumps({**stored[gens[0]], "text": None}), gens[0]),
        )
        db.execute("UPDATE completions SET value = '{}', checksum = NULL WHERE key = ?", (gens[1],))
        db.execute(
            "UPDATE completions SET value = ? WHERE key = ?",  # checksum kept: an edit
            (json.dumps({**stored[lls[0]], "logprob": 0.0}), lls[0]),
        )
        db.execute("UPDATE completions SET checksum = NULL WHERE key = ?", (lls[1],))  # sound legacy row
    legacy = _rows(cache.path)[lls[1]]
    capsys.readouterr()

    backend = Answers(seed=7)
    _, computed = run_requests(prompts, identity, cache, lambda: backend)
    [line] = [ln for ln in capsys.readouterr().err.splitlines() if ln and not ln.startswith("infer:")]  # tqdm aside
    head = f"warning: {cache.path}: 3 cached answer(s) failed their check ("
    tail = "); not served (infer recomputes them)"
    assert line.startswith(head) and line.endswith(tail)
    assert set(line[len(head) : -len(tail)].split("; ")) == {
        "1 a generation without text",
        "1 no 'text'",
        "1 edited since written (checksum mismatch)",
    }
    assert computed == 3 and sorted(backend.computed) == sorted([gens[0], gens[1], lls[0]])
    rows = _rows(cache.path)
    for key in backend.computed:  # replaced by the recomputed answer, with its checksum
        value, digest = rows[key]
        assert json.loads(value) == _answer(requests[key], 7) and digest == checksum(key, value)
    assert rows[lls[1]] == legacy  # served, not rewritten
    assert run_requests(prompts, identity, cache, never)[1] == 0 and "warning" not in capsys.readouterr().err


# The statements of the request cache before checksums (evaltrail 83545cc): a database this code
# has opened must keep working for a run of that code still going on the same machine.
OLD_TABLE = "CREATE TABLE IF NOT EXISTS completions (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
OLD_PUT = "INSERT OR REPLACE INTO completions (key, value) VALUES (?, ?)"
OLD_ADD = "INSERT INTO completions (key, value) VALUES (?, ?)"
OLD_GET = "SELECT key, value FROM completions WHERE key IN (?)"


def never():
    raise AssertionError("a model was loaded: a cached answer was not served")


def test_an_old_database_is_served_and_old_code_keeps_writing_it(repo, tmp_path):
    run, _ = repo
    prompts, identity, requests = _alpha(run)
    keys = sorted(requests)
    path = tmp_path / "old.sqlite"
    old = sqlite3.connect(path, timeout=60, isolation_level=None)  # the old code's connection, kept open
    old.execute("PRAGMA journal_mode=WAL")
    old.execute(OLD_TABLE)
    for key in keys[:-1]:
        old.execute(OLD_PUT, (key, json.dumps(_answer(requests[key], 1))))

    new = RequestCache(path)  # adds the checksum column; the old rows are legacy rows
    assert "checksum" in {c[1] for c in old.execute("PRAGMA table_info(completions)")}
    assert new.get_many(keys[:-1]) == {k: _answer(requests[k], 1) for k in keys[:-1]}
    assert new.put(keys[-1], _answer(requests[keys[-1]], 2), requests[keys[-1]]) == _answer(requests[keys[-1]], 2)

    old.execute(OLD_ADD, ("k-old-add", json.dumps(_answer(requests[keys[0]], 3))))
    old.execute(OLD_PUT, (keys[-1], json.dumps(_answer(requests[keys[-1]], 4))))  # old code: last writer wins
    assert json.loads(old.execute(OLD_GET, (keys[-1],)).fetchone()[1]) == _answer(requests[keys[-1]], 4)
    rows = _rows(path)
    assert rows[keys[-1]][1] is None and rows["k-old-add"][1] is None  # written by old code: legacy rows
    assert all(rows[k][1] == checksum(k, rows[k][0]) for k in keys[:-1])  # adopted when `new` opened
    table, computed = run_requests(prompts, identity, new, never)
    assert computed == 0 and table.num_rows == len(prompts)
    old.close()

    # the next open adopts the old code's rows too; an edit after that is caught like any other
    new.close()
    assert RequestCache(path).get_many(["k-old-add"]) and _rows(path)["k-old-add"][1] is not None
    with sqlite3.connect(path) as db:
        db.execute(
            "UPDATE completions SET value = ? WHERE key = ?",
            (json.dumps({**_answer(requests[keys[0]], 1), "logprob": 0.5}), keys[0]),
        )
    assert RequestCache(path).get_many([keys[0]]) == {}


@pytest.mark.parametrize(
    "damage, detail",
    [
        (lambda data: b"not a database, just bytes" * 200, "file is not a database"),
        (lambda data: data[: len(data) // 2], "database disk image is malformed"),
        (lambda data: b"", "a 0-byte file"),
    ],
    ids=["bad-header", "truncated", "empty"],
)
def test_a_damaged_cache_stops_with_one_line_naming_it_and_the_fix(repo, tmp_path, capsys, damage, detail):
    _, cache = repo
    for i in range(300):  # pages enough that half of the file is missing some
        cache.put(f"filler-{i}", _answer({"method": "generate"}, i))
    cache.close()
    path = cache.path
    path.write_bytes(damaged := damage(path.read_bytes()))
    assert main(["cache", "export", "--out", str(tmp_path / "a.parquet")]) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line == (
        f"error: {path}: not a readable request cache ({detail}); move it away (mv {path} {path}.broken) "
        f"and re-run to recompute its answers, or rebuild it with `evaltrail cache import` of an "
        f"`evaltrail cache export` file"
    )
    assert path.read_bytes() == damaged  # left as it was, for the user to move


def test_a_new_cache_is_never_an_empty_file(tmp_path):
    path = tmp_path / "new" / "requests.sqlite"
    RequestCache(path).close()
    assert path.stat().st_size > 0 and [p.name for p in path.parent.iterdir()] == ["requests.sqlite"]
    assert RequestCache(path).get_many(["k"]) == {}  # reopened: a valid empty cache


def test_two_runs_sharing_a_cache_commit_the_first_writers_answers(repo, tmp_path):
    """Both runs compute every request; the one that stores second goes on with the stored
    answers, not its own, so both clones' completions equal what the cache holds."""
    run, _ = repo
    prompts, identity, requests = _alpha(run)
    shared = tmp_path / "shared.sqlite"
    first, second = RequestCache(shared), RequestCache(shared)
    theirs = {}

    class Racing(Answers):
        """Computes while the other run finishes the same requests and stores them first."""

        def map_requests(self, items, call):
            theirs["table"], _ = run_requests(prompts, identity, first, lambda: Answers(seed=1))
            yield from super().map_requests(items, call)

    mine, computed = run_requests(prompts, identity, second, lambda: Racing(seed=2))
    assert computed == len(requests) == 7
    assert mine.equals(theirs["table"])
    assert {k: json.loads(v) for k, (v, _) in _rows(shared).items()} == {k: _answer(c, 1) for k, c in requests.items()}
    assert run_requests(prompts, identity, RequestCache(shared), never)[0].equals(mine)


def test_an_answer_that_is_not_a_completion_is_never_cached(tmp_path):
    cache = RequestCache(tmp_path / "r.sqlite")
    with pytest.raises(
        EvaltrailError,
        match=r"r\.sqlite: an answer to store is not a completion \(no 'text'\); "
        r"not cached$",
    ):
        cache.put("k", {}, {"method": "generate"})
    assert _rows(cache.path) == {}
