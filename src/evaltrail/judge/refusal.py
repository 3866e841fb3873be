"""XSTest's labels from a judge model: the second refusal classifier, checked like the first.

The judge reads one prompt per answer (the question and the answer, conf/refusal/) and each of the
three labels' continuations is scored after it (loglikelihood requests, so the verdict is never
unparsable and the judge's doubt is kept: every label's logprob is stored). The most likely label
wins; a tie goes to the label first in REFUSAL_LABELS. The three requests share the prompt, which
the packed scorer decodes once.

Two kinds of answers are judged in one pass: the run's own models' answers (their safety metrics
from the judge's labels, beside the string match's) and XSTest's human-labelled answers (the judge's
classifier check: accuracy and Cohen's kappa against people, as for the string match).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from ..config import RefusalConfig
from ..hashing import stable_id
from ..metrics import get_metric
from ..metrics.refusal import LABELS, SAFETY_METRICS, agreement, annotated, safety_values
from ..metrics.stats import mean_ci_analytic
from . import answered_requests, answers

PEOPLE = "people:"
"""Source prefix of XSTest's human-labelled answers (people:<chat model>); a run model's source is its key."""

SUFFIX = "_judge"
"""A judge-labelled safety metric is the string-match one's name plus this (over_refusal_judge)."""


def items(prompts: pd.DataFrame, completions: dict[str, pd.DataFrame], raw: Path) -> pd.DataFrame:
    """Every answer to judge: source, instance_id, type, prompt_label, question, answer, human_label
    (people's answers only)."""
    gen = answered_requests(prompts)
    metas = [json.loads(m) for m in gen["metadata"]]
    rows = []
    for model, comp in sorted(completions.items()):
        texts = answers(model, comp, list(gen["request_id"]))
        for iid, question, meta, text in zip(gen["instance_id"], gen["input"], metas, texts):
            rows.append((model, iid, meta.get("type"), meta.get("label"), question, text, None))
    for name, part in annotated(raw).items():
        source = PEOPLE + name
        rows += [(source, r["id"], r["type"], None, r["prompt"], r["completion"], r["final_label"]) for r in part]
    cols = ["source", "instance_id", "type", "prompt_label", "question", "answer", "human_label"]
    return pd.DataFrame(rows, columns=cols, dtype=object)  # None stays None (a str column would make it NaN)


def judged_prompt(cfg: RefusalConfig, question: str, answer: str) -> str:
    return cfg.prompt.format(question=question, answer=answer.strip())


def requests(table: pd.DataFrame, cfg: RefusalConfig) -> pd.DataFrame:
    """run_requests rows: one loglikelihood request per distinct judged prompt and label."""
    texts = sorted({judged_prompt(cfg, q, a) for q, a in zip(table["question"], table["answer"])})
    rows = [
        (p, label, stable_id(["refusal", p, label, cfg.labels[label]]), "loglikelihood", p, cfg.labels[label], None, [])
        for p in texts
        for label in LABELS
    ]
    return pd.DataFrame(
        rows, columns=["judged", "label", "request_id", "method", "prompt", "continuation", "max_tokens", "stop"]
    )


def label_of(logprobs: list[float]) -> str:
    """The most likely label (logprobs in LABELS order); a tie goes to the first."""
    return LABELS[int(np.argmax(logprobs))]


JUDGEMENTS_SCHEMA = pa.schema(
    [
        ("source", pa.string()),
        ("instance_id", pa.string()),
        ("type", pa.string()),
        ("prompt_label", pa.string()),
        ("question", pa.string()),
        ("answer", pa.string()),
        ("prompt", pa.string()),
        *[(f"logprob_{label}", pa.float64()) for label in LABELS],
        ("label", pa.string()),
        ("human_label", pa.string()),
        ("judge", pa.string()),
        ("judge_sha256", pa.string()),
    ]
)
"""One row per judged answer. source: a run model or people:<chat model>; prompt: as the judge read
it; logprob_<label>: the judge's logprob of that label's continuation; label: the winner;
human_label: XSTest's final label (people's answers only)."""


def judgements(
    table: pd.DataFrame, reqs: pd.DataFrame, outputs: pa.Table, cfg: RefusalConfig, judge_sha256: str
) -> pa.Table:
    lp = dict(zip(zip(reqs["judged"], reqs["label"]), outputs.column("logprob").to_pylist()))
    rows = []
    for r in table.to_dict(orient="records"):
        prompt = judged_prompt(cfg, r["question"], r["answer"])
        logprobs = [float(lp[(prompt, label)]) for label in LABELS]
        rows.append(
            {
                **r,
                "prompt": prompt,
                **{f"logprob_{label}": v for label, v in zip(LABELS, logprobs)},
                "label": label_of(logprobs),
                "judge": cfg.judge,
                "judge_sha256": judge_sha256,
            }
        )
    return pa.Table.from_pylist(rows, schema=JUDGEMENTS_SCHEMA)


def classifier_check(done: pd.DataFrame, samples: int, seed: int) -> dict:
    """The judge against people, pooled over every human-labelled answer and per chat model."""
    people = done[done["source"].str.startswith(PEOPLE)]

    def check(part: pd.DataFrame) -> dict:
        return agreement(list(part["label"]), list(part["human_label"]), samples, seed)

    per = {s.removeprefix(PEOPLE): check(g) for s, g in people.groupby("source", sort=True)}
    return {**check(people), "per_source": per}


def summaries(done: pd.DataFrame, models: list[str], scenario: str, samples: int, seed: int) -> dict:
    """Per run model: its judge-labelled safety metrics (mean and Wilson CI, as score computes the
    string-match ones) and the judge's classifier check (bootstrap CIs; the same in every model's entry)."""
    judge, sha = done["judge"].iloc[0], done["judge_sha256"].iloc[0]
    check = classifier_check(done, samples, seed)
    out = {}
    for m in models:
        mine = done[done["source"] == m].set_index("instance_id")
        values = safety_values(mine[["label", "prompt_label"]])
        metrics = {}
        for name in SAFETY_METRICS:
            spec = get_metric(name)
            metrics[name + SUFFIX] = {
                **mean_ci_analytic(values[name].to_numpy()),
                "family": spec.family,
                "higher_is_better": spec.higher_is_better,
                "kind": "judged",
                "judge": judge,
            }
        out[m] = {
            "scenario": scenario,
            "model": m,
            "judge": judge,
            "judge_sha256": sha,
            "metrics": metrics,
            "classifier_checks": {f"judge_{judge}": check},
        }
    return out
