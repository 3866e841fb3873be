"""NarrativeQA as retrieval-augmented QA: a question answered from passages a retriever found.

Every plot summary in the file is split into chunks of `chunk_sentences` sentences; together they
are the corpus (about 700 chunks from 101 stories). For each question a TF-IDF retriever (cosine,
fit on the corpus) takes the `top_k` best chunks, from any story. The prompt shows those contexts
and the question; metadata keeps the question, the contexts in rank order and, per context,
whether it comes from the question's own story (a retrieval label the RAG metrics never read).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..config import ScenarioConfig
from ..errors import EvaltrailError
from ..schema import Reference, make_instance
from . import register
from .rows import convert, jsonl_rows
from .text import sentences


def chunks(passage: str, size: int) -> list[str]:
    sents = sentences(passage)
    return [" ".join(sents[i : i + size]) for i in range(0, len(sents), size)]


def _positive_int(cfg: ScenarioConfig, key: str) -> int:
    value = cfg.options.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise EvaltrailError(f"params.yaml: scenario.{cfg.name}.{key}: {value!r} is not a positive integer")
    return value


def retrieve(corpus: list[str], queries: list[str], top_k: int) -> np.ndarray:
    """Indices of the top_k corpus entries per query by TF-IDF cosine; ties keep corpus order."""
    try:
        from sklearn.feature_extraction.text import TfidfVectorizer
    except ImportError:
        raise EvaltrailError("narrative_qa_rag's retriever needs scikit-learn: pip install -e '.[rag]'") from None

    vec = TfidfVectorizer(lowercase=True, stop_words="english", sublinear_tf=True)
    docs = vec.fit_transform(corpus)
    sims = (vec.transform(queries) @ docs.T).toarray()
    return np.argsort(-sims, axis=1, kind="stable")[:, :top_k]


@register("narrative_qa_rag", options=("chunk_sentences", "top_k"))
def load(cfg: ScenarioConfig, raw: Path) -> dict[str, list]:
    size, top_k = _positive_int(cfg, "chunk_sentences"), _positive_int(cfg, "top_k")
    path = raw / f"{cfg.eval_split}.jsonl"
    rows = []

    def keep(row: dict):
        passage, question = row["passage"].strip(), row["question"].strip()
        answers = [a.strip() for a in row["answer"] if a.strip()]
        if not passage or not question or not answers:
            raise ValueError("empty passage, question or answers")
        rows.append((passage, question, list(dict.fromkeys(answers))))

    convert(cfg, path, jsonl_rows(path), keep)
    stories = sorted({p for p, _, _ in rows})  # corpus order: by text, not by file position
    corpus, owner = [], []
    for sid, passage in enumerate(stories):
        for c in chunks(passage, size):
            corpus.append(c)
            owner.append(sid)
    story_of = {p: i for i, p in enumerate(stories)}
    hits = retrieve(corpus, [q for _, q, _ in rows], top_k)
    out = []
    for (passage, question, answers), idx in zip(rows, hits):
        contexts = [corpus[i] for i in idx]
        text = "\n".join(f"Context {n}: {c}" for n, c in enumerate(contexts, 1)) + f"\nQuestion: {question}"
        meta = {
            "question": question,
            "contexts": contexts,
            "context_from_story": [owner[i] == story_of[passage] for i in idx],
        }
        out.append(make_instance(cfg.eval_split, text, [Reference(a, True) for a in answers], meta))
    return {cfg.eval_split: out}
