"""Ragas' four RAG metrics, from judge checks whose raw outputs are kept.

An answer's or reference's statements are its sentences (a deterministic split; Ragas asks an LLM
to decompose them). Each check is one judge request (generate) or one per label (logprob):
- faithfulness: share of the answer's statements the judge says the contexts support;
- answer relevancy: cosine similarity between the question and a question the judge writes back
  from the answer (sentence embeddings; Ragas averages several generated questions, greedy decoding
  gives one, and Ragas' zeroing of noncommittal answers is not applied);
- context precision: Ragas' average precision of the contexts the judge finds useful for the
  reference, in rank order: sum_k precision@k * v_k / sum_k v_k (0 when none is useful);
- context recall: share of the reference's statements the judge attributes to the contexts.
A check whose output names no verdict leaves its metric undefined for that instance; undefined
values are counted and left out of means, never averaged as NaN. Context precision and recall read
no answer, so they are judged once per instance and are the same for every model (they rate the
retriever).
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pyarrow as pa

from ..config import RagConfig
from ..errors import EvaltrailError
from ..hashing import stable_id
from ..metrics.stats import mean_ci_analytic
from ..scenarios.text import sentences
from . import answered_requests, answers

METRICS = ("faithfulness", "answer_relevancy", "context_precision", "context_recall")
RETRIEVAL = ""  # the `model` of checks that read no answer (context precision and recall)


def rag_items(prompts: pd.DataFrame, completions: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per (model, original instance): question, contexts, answer, reference (first gold)."""
    gen = answered_requests(prompts)
    metas = [json.loads(m) for m in gen["metadata"]]
    for iid, meta in zip(gen["instance_id"], metas):
        if "contexts" not in meta or "question" not in meta:
            raise EvaltrailError(
                f"instance {iid}: no question/contexts in its metadata; RAG metrics "
                f"need a RAG scenario (e.g. narrative_qa_rag)"
            )
    golds = [[ref["text"] for ref in refs if ref["correct"]] for refs in gen["references"]]
    rows = []
    for model, comp in sorted(completions.items()):
        texts = answers(model, comp, list(gen["request_id"]))
        rows += [
            {
                "model": model,
                "instance_id": iid,
                "question": meta["question"],
                "contexts": list(meta["contexts"]),
                "answer": text.strip(),
                "reference": gold[0] if gold else "",
            }
            for iid, meta, text, gold in zip(gen["instance_id"], metas, texts, golds)
        ]
    return pd.DataFrame(rows, columns=["model", "instance_id", "question", "contexts", "answer", "reference"])


def _numbered(contexts: list[str]) -> str:
    return "\n".join(f"[{i}] {c}" for i, c in enumerate(contexts, 1))


def checks(items: pd.DataFrame, cfg: RagConfig) -> pd.DataFrame:
    """Every judge check: check_id (content hash), metric, model, instance_id, item, text, prompt."""
    rows = []

    def add(metric, model, iid, item, text, prompt):
        rows.append(
            {
                "check_id": stable_id([metric, model, iid, item, prompt]),
                "metric": metric,
                "model": model,
                "instance_id": iid,
                "item": item,
                "text": text,
                "prompt": prompt,
            }
        )

    for r in items.itertuples(index=False):
        ctx = _numbered(r.contexts)
        for i, s in enumerate(sentences(r.answer)):
            add("faithfulness", r.model, r.instance_id, i, s, cfg.supported.format(contexts=ctx, statement=s))
        if r.answer:
            add("answer_relevancy", r.model, r.instance_id, 0, r.answer, cfg.question.format(answer=r.answer))
    for r in items.drop_duplicates("instance_id").itertuples(index=False):
        ctx = _numbered(r.contexts)
        for k, c in enumerate(r.contexts):
            add(
                "context_precision",
                RETRIEVAL,
                r.instance_id,
                k,
                c,
                cfg.useful.format(question=r.question, reference=r.reference, context=c),
            )
        for i, s in enumerate(sentences(r.reference)):
            add("context_recall", RETRIEVAL, r.instance_id, i, s, cfg.attributed.format(contexts=ctx, statement=s))
    cols = ["check_id", "metric", "model", "instance_id", "item", "text", "prompt"]
    return pd.DataFrame(rows, columns=cols).sort_values(["instance_id", "metric", "model", "item"], ignore_index=True)


def requests(chk: pd.DataFrame, cfg: RagConfig) -> pd.DataFrame:
    """run_requests rows: the generated question, and each yes/no check (one request per label in
    logprob mode)."""
    rows = []
    for c in chk.itertuples(index=False):
        if c.metric == "answer_relevancy":
            rows.append((c.check_id, None, c.check_id, "generate", c.prompt, None, cfg.question_max_tokens, ["\n"]))
        elif cfg.method == "generate":
            rows.append((c.check_id, None, c.check_id, "generate", c.prompt, None, cfg.max_tokens, ["\n"]))
        else:
            rows += [
                (c.check_id, label, stable_id([c.check_id, label]), "loglikelihood", c.prompt, label, None, [])
                for label in (cfg.yes_label, cfg.no_label)
            ]
    return pd.DataFrame(
        rows, columns=["check_id", "label", "request_id", "method", "prompt", "continuation", "max_tokens", "stop"]
    )


def parse_yes_no(text: str | None, cfg: RagConfig) -> float | None:
    """1.0 / 0.0 from the first yes or no label in a reply (whole word, any case); None if neither."""
    pattern = r"\b(" + re.escape(cfg.yes_label) + "|" + re.escape(cfg.no_label) + r")\b"
    hit = re.search(pattern, text or "", flags=re.IGNORECASE)
    return None if hit is None else float(hit.group(1).lower() == cfg.yes_label.lower())


CHECKS_SCHEMA = pa.schema(
    [
        ("check_id", pa.string()),
        ("metric", pa.string()),
        ("model", pa.string()),
        ("instance_id", pa.string()),
        ("item", pa.int32()),
        ("text", pa.string()),
        ("prompt", pa.string()),
        ("output", pa.string()),
        ("yes_logprob", pa.float64()),
        ("no_logprob", pa.float64()),
        ("verdict", pa.float64()),
        ("judge", pa.string()),
        ("judge_sha256", pa.string()),
    ]
)
"""One row per check. text: the statement, context or answer checked; output: the judge's reply
(generate, and the generated question); yes/no_logprob: its label logprobs (logprob mode); verdict:
1 yes, 0 no, null when undefined (and for the generated question)."""


def read_checks(
    chk: pd.DataFrame, reqs: pd.DataFrame, outputs: pa.Table, cfg: RagConfig, judge_sha256: str
) -> pa.Table:
    out = reqs[["check_id", "label"]].assign(**outputs.select(["text", "logprob"]).to_pandas())
    got = {}
    for cid, g in out.groupby("check_id", sort=False):
        if g["label"].isna().all():
            text = g["text"].iloc[0]
            got[cid] = (text, None, None, parse_yes_no(text, cfg))
        else:
            lp = dict(zip(g["label"], g["logprob"].astype(float)))
            got[cid] = (None, lp[cfg.yes_label], lp[cfg.no_label], float(lp[cfg.yes_label] > lp[cfg.no_label]))
    rows = []
    for c in chk.to_dict(orient="records"):
        output, yes, no, verdict = got[c["check_id"]]
        if c["metric"] == "answer_relevancy":
            verdict = None
        rows.append(
            {
                **c,
                "output": output,
                "yes_logprob": yes,
                "no_logprob": no,
                "verdict": verdict,
                "judge": cfg.judge,
                "judge_sha256": judge_sha256,
            }
        )
    return pa.Table.from_pylist(rows, schema=CHECKS_SCHEMA)


def faithfulness(verdicts: list[float | None]) -> float | None:
    if not verdicts or any(v is None for v in verdicts):
        return None
    return float(np.mean(verdicts))


context_recall = faithfulness  # the same share, of reference statements attributed to the contexts


def context_precision(verdicts: list[float | None]) -> float | None:
    """Ragas: sum_k (precision@k * v_k) / sum_k v_k over the contexts in rank order; 0 if none is useful."""
    if not verdicts or any(v is None for v in verdicts):
        return None
    v = np.asarray(verdicts, dtype=float)
    if v.sum() == 0:
        return 0.0
    precision_at = np.cumsum(v) / np.arange(1, len(v) + 1)
    return float((precision_at * v).sum() / v.sum())


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _none(x) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


def scores(items: pd.DataFrame, done: pd.DataFrame, embed) -> pd.DataFrame:
    """Per (model, instance, metric): value (None when undefined). `embed(texts)` -> vectors."""
    verdicts = {
        k: [_none(v) for v in g.sort_values("item")["verdict"]]
        for k, g in done.groupby(["metric", "model", "instance_id"], sort=False)
    }
    asked = done[done["metric"] == "answer_relevancy"].set_index(["model", "instance_id"])["output"]
    pairs = [(r.question, (asked.get((r.model, r.instance_id)) or "").strip()) for r in items.itertuples(index=False)]
    texts = sorted({t for pair in pairs for t in pair if t})
    vectors = dict(zip(texts, embed(texts))) if texts else {}
    rows = []
    for r, (q, gq) in zip(items.itertuples(index=False), pairs):
        values = {
            "faithfulness": faithfulness(verdicts.get(("faithfulness", r.model, r.instance_id), [])),
            "answer_relevancy": round(cosine(vectors[q], vectors[gq]), 6) if gq else None,
            "context_precision": context_precision(verdicts.get(("context_precision", RETRIEVAL, r.instance_id), [])),
            "context_recall": context_recall(verdicts.get(("context_recall", RETRIEVAL, r.instance_id), [])),
        }
        rows += [{"model": r.model, "instance_id": r.instance_id, "metric": m, "value": values[m]} for m in METRICS]
    return pd.DataFrame(rows, columns=["model", "instance_id", "metric", "value"])


def summary(table: pd.DataFrame, model: str, scenario: str, judge: str, judge_sha256: str) -> dict:
    """A score-summary-shaped dict of one model's RAG metrics: mean and 95% CI over defined values,
    and how many were undefined."""
    metrics = {}
    for m in METRICS:
        vals = table[(table["model"] == model) & (table["metric"] == m)]["value"]
        defined = vals.dropna().to_numpy(dtype=float)
        st = mean_ci_analytic(defined) if len(defined) else {"mean": None, "ci_low": None, "ci_high": None, "n": 0}
        metrics[m] = {
            **st,
            "undefined": int(vals.isna().sum()),
            "family": "accuracy",
            "higher_is_better": True,
            "kind": "rag",
            "judge": judge,
        }
    return {"scenario": scenario, "model": model, "judge": judge, "judge_sha256": judge_sha256, "metrics": metrics}


SCORES_SCHEMA = pa.schema(
    [("model", pa.string()), ("instance_id", pa.string()), ("metric", pa.string()), ("value", pa.float64())]
)
"""value: null when undefined (a check without a verdict, no statement, no generated question)."""


def scores_table(table: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(
        table.sort_values(["model", "instance_id", "metric"], ignore_index=True),
        schema=SCORES_SCHEMA,
        preserve_index=False,
    )


def shown(st: dict) -> str:
    mean = "undefined" if st["mean"] is None else f"{st['mean']:.3f}"
    return f"{mean} (n={st['n']}, undefined {st['undefined']})"
