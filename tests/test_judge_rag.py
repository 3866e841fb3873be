"""evaltrail.judge.rag: Ragas' metrics against hand-computed cases, the judge stubbed (the real judge
runs in test_rag_pipeline)."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from evaltrail.config import RagConfig, run_from_conf
from evaltrail.errors import EvaltrailError
from evaltrail.judge import rag
from evaltrail.schema import COMPLETIONS_SCHEMA

from .conftest import ROOT

CFG = dict(
    scenario="s",
    judge="j",
    supported="C:\n{contexts}\nS: {statement}\nOK?",
    useful="Q: {question}\nR: {reference}\nC: {context}\nUseful?",
    attributed="C:\n{contexts}\nS: {statement}\nIn?",
    question="A: {answer}\nQuestion:",
)
CONTEXTS = ["Mark runs a pirate radio station.", "Nora writes poems.", "The school is in Phoenix."]


def _prompts() -> pd.DataFrame:
    meta = {"question": "Who runs the radio station?", "contexts": CONTEXTS}
    return pd.DataFrame(
        [
            {
                "request_id": "r1",
                "instance_id": "i1",
                "method": "generate",
                "perturbation": None,
                "trial": 0,
                "metadata": json.dumps(meta),
                "references": [{"text": "Mark runs it. He is a student.", "correct": True}],
            }
        ]
    )


def _completions(text: str) -> pd.DataFrame:
    return pd.DataFrame({"request_id": ["r1"], "text": [text]})


def test_context_precision_is_ragas_average_precision_over_ranks():
    assert rag.context_precision([1.0, 0.0, 1.0]) == pytest.approx((1 / 1 + 2 / 3) / 2)
    assert rag.context_precision([0.0, 1.0]) == pytest.approx(0.5)
    assert rag.context_precision([0.0, 0.0]) == 0.0  # nothing useful retrieved: 0, as Ragas
    assert rag.context_precision([1.0, None]) is None and rag.context_precision([]) is None


def test_faithfulness_and_recall_are_supported_shares_undefined_without_statements():
    assert rag.faithfulness([1.0, 0.0, 1.0, 1.0]) == 0.75
    assert rag.faithfulness([]) is None and rag.faithfulness([1.0, None]) is None
    assert rag.context_recall([0.0, 1.0]) == 0.5


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def _stub_logprob(prompt: str, label: str) -> float:
    """A judge that says yes when every word of the checked sentence occurs in the contexts shown
    (or, for usefulness, when the context shares a word with the reference beyond stop words)."""
    if prompt.endswith("Useful?"):
        ref, ctx = prompt.split("\nR: ")[1].split("\nC: ")
        yes = bool((_words(ref) & _words(ctx)) - {"the", "is", "a", "he", "it"})
    else:
        ctx, stmt = prompt.split("C:\n")[1].split("\nS: ")
        yes = _words(stmt.rsplit("\n", 1)[0]) <= _words(ctx)
    return -0.1 if (label == "Yes") == yes else -3.0


def _embed(texts):
    """Bag-of-words vectors over a fixed vocabulary: cosines a reader can compute by hand."""
    vocab = ["who", "runs", "the", "radio", "station", "mark", "what"]
    return np.array([[float(w in _words(t)) for w in vocab] for t in texts])


def test_all_four_metrics_from_stubbed_judge_checks():
    cfg = RagConfig(**CFG)
    items = rag.rag_items(_prompts(), {"m": _completions("Mark runs the radio station. He sings opera.")})
    chk = rag.checks(items, cfg)
    assert chk.groupby("metric").size().to_dict() == {
        "answer_relevancy": 1,
        "context_precision": 3,
        "context_recall": 2,
        "faithfulness": 2,
    }
    assert (chk.loc[chk["metric"].str.startswith("context"), "model"] == rag.RETRIEVAL).all()
    reqs = rag.requests(chk, cfg)
    assert len(reqs) == 1 + 2 * 7 and reqs["request_id"].is_unique
    rows = []
    for r in reqs.itertuples(index=False):
        text = "What runs the radio station?" if r.method == "generate" else None
        lp = 0.0 if r.method == "generate" else _stub_logprob(r.prompt, r.continuation)
        rows.append({"request_id": r.request_id, "text": text, "logprob": lp})
    out = pa.Table.from_pylist(rows, schema=pa.schema([COMPLETIONS_SCHEMA.field(c) for c in rows[0]]))
    done = rag.read_checks(chk, reqs, out, cfg, "a" * 64).to_pandas()
    assert done.loc[done["metric"] == "answer_relevancy", "output"].item() == "What runs the radio station?"
    table = rag.scores(items, done, _embed).set_index("metric")["value"]
    # "Mark runs the radio station.": every word is in the contexts (yes); "He sings opera.": no -> 1/2
    assert table["faithfulness"] == 0.5
    # contexts 1 (mark, runs) useful, 2 and 3 not -> AP = 1
    assert table["context_precision"] == 1.0
    # "Mark runs it." -> "it" is not in the contexts: no; "He is a student." no -> 0
    assert table["context_recall"] == 0.0
    # q = who runs the radio station (who, runs, the, radio, station); generated: what runs the radio station
    assert table["answer_relevancy"] == pytest.approx(4 / 5)


def test_generated_verdicts_leave_unparsable_checks_undefined_and_counted():
    cfg = RagConfig(**CFG, method="generate")
    items = rag.rag_items(_prompts(), {"m": _completions("Mark runs the station."), "n": _completions("")})
    chk = rag.checks(items, cfg)
    reqs = rag.requests(chk, cfg)
    assert len(reqs) == len(chk) and (reqs["method"] == "generate").all()
    replies = {
        "faithfulness": "Maybe.",
        "context_precision": "Yes, it is.",
        "context_recall": "no",
        "answer_relevancy": "Who runs the station?",
    }
    metric = dict(zip(chk["check_id"], chk["metric"]))
    rows = [
        {"request_id": r, "text": replies[metric[c]], "logprob": 0.0}
        for r, c in zip(reqs["request_id"], reqs["check_id"])
    ]
    out = pa.Table.from_pylist(rows, schema=pa.schema([COMPLETIONS_SCHEMA.field(c) for c in rows[0]]))
    done = rag.read_checks(chk, reqs, out, cfg, "b" * 64).to_pandas()
    table = rag.scores(items, done, _embed)
    summ_m = rag.summary(table, "m", "s", "j", "b" * 64)["metrics"]
    assert summ_m["faithfulness"]["mean"] is None and summ_m["faithfulness"]["undefined"] == 1
    assert summ_m["context_precision"]["mean"] == 1.0 and summ_m["context_recall"]["mean"] == 0.0
    summ_n = rag.summary(table, "n", "s", "j", "b" * 64)["metrics"]  # an empty answer: no statement, no question
    assert summ_n["faithfulness"]["undefined"] == 1 and summ_n["answer_relevancy"]["undefined"] == 1
    assert summ_n["answer_relevancy"]["n"] == 0 and summ_n["context_recall"]["n"] == 1


def test_rag_configs_name_the_bad_key():
    with pytest.raises(EvaltrailError, match=r"rag\.s\.useful: the prompt lacks \{context\}"):
        RagConfig(**{**CFG, "useful": "{question} {reference}"})
    with pytest.raises(EvaltrailError, match=r"rag\.s\.method: 'vote'"):
        RagConfig(**CFG, method="vote")
    run = run_from_conf(["suite=rag"], ROOT / "conf")
    assert run.rag["narrative_qa_rag"].judge in run.model
    with pytest.raises(EvaltrailError, match="RAG metrics need a RAG scenario"):
        rag.rag_items(_prompts().assign(metadata="{}"), {"m": _completions("x")})
