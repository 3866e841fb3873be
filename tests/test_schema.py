"""Instance and request ids are content hashes: stable across runs and row order."""

from __future__ import annotations

import pyarrow as pa

from evaltrail.schema import PROMPTS_SCHEMA, Reference, make_instance, make_request, prompts_table


def test_instance_id_is_content_hash():
    refs = [Reference("4", True), Reference("5", False)]
    a = make_instance("test", "2+2?", refs, {"subject": "math"})
    b = make_instance("test", "2+2?", list(refs), {"subject": "other"})
    assert a.instance_id == b.instance_id and len(a.instance_id) == 16
    assert make_instance("test", "2+2?", refs[::-1]).instance_id != a.instance_id
    assert a.gold_indices == (0,) and a.choices == ("4", "5")


def test_request_id_covers_everything_that_changes_the_answer():
    base = make_request("i1", 0, "loglikelihood", "ctx", continuation=" a", choice_index=0)
    assert (
        base.request_id == make_request("i1", 0, "loglikelihood", "ctx", continuation=" a", choice_index=0).request_id
    )
    assert base.request_id != make_request("i1", 0, "loglikelihood", "ctx", continuation=" b").request_id
    assert base.request_id != make_request("i1", 1, "loglikelihood", "ctx", continuation=" a").request_id


def test_prompts_table_has_the_explicit_schema():
    inst = make_instance("test", "q", [Reference("x", True)], {"k": 1})
    req = make_request(inst.instance_id, 0, "generate", "Q: q\nA:", max_tokens=3, stop=("\n",))
    table = prompts_table([(inst, req)])
    assert table.schema == PROMPTS_SCHEMA
    row = table.to_pylist()[0]
    assert row["references"] == [{"text": "x", "correct": True}] and row["metadata"] == '{"k": 1}'
    assert isinstance(table, pa.Table) and row["continuation"] is None
