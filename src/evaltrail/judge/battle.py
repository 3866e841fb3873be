"""A scenario's battles end to end: contestants' answers -> judge requests -> verdicts -> ratings.

Pure functions over tables; stages/battle.py runs the judge requests through a backend (with the
request cache) and writes what these return. The verdict table keeps, per judgement, the request
whose completions were compared, the prompt exactly as the judge saw it, the judge's raw output
and the judge's identity, so a rating traces back to each judgement and every answer behind it.
"""

from __future__ import annotations

import math

import pandas as pd
import pyarrow as pa

from ..aggregate.ranking import arena_ratings
from ..errors import EvaltrailError
from ..hashing import stable_id
from . import answered_requests, answers
from .arena import (
    JudgePrompt,
    battles_from_margins,
    battles_from_verdicts,
    judge_requests,
    parse_verdict,
    win_rate_matrix,
)

VERDICTS_SCHEMA = pa.schema(
    [
        ("judgement_id", pa.string()),
        ("instance_id", pa.string()),
        ("request_id", pa.string()),
        ("model_a", pa.string()),
        ("model_b", pa.string()),
        ("order", pa.string()),
        ("prompt", pa.string()),
        ("output", pa.string()),
        ("label_logprobs", pa.list_(pa.float64())),
        ("verdict", pa.string()),
        ("margin", pa.float64()),
        ("judge", pa.string()),
        ("judge_sha256", pa.string()),
        ("num_prompt_tokens", pa.int32()),
        ("truncated_tokens", pa.int32()),
    ]
)
"""request_id: the contestants' request whose completions were compared. The judge's raw output:
`output` (its text, method generate) or `label_logprobs` (each label's logprob in the order of the
config's labels, method logprob). verdict: first / second / tie, null when a generated output names
no label; margin (logprob): logprob of the first answer's label minus the second's; judge_sha256:
the judge's identity."""


def _cut(text: str, limit: int | None) -> str:
    """At most `limit` characters, cut at a word and marked, so the judge sees that it was cut."""
    text = (text or "").strip()
    if limit is None or len(text) <= limit:
        return text
    head = text[:limit].rsplit(None, 1)[0] if " " in text[:limit] else text[:limit]
    return head + " [...]"


def contestant_answers(
    prompts: pd.DataFrame, completions: dict[str, pd.DataFrame], max_chars: int | None
) -> pd.DataFrame:
    """One row per (original instance, model): instance_id, request_id, instruction, model, answer.

    Only the unperturbed generation request of trial 0 is judged (variants and extra trials are other
    questions). A model without a completion for a request is an error naming it, not a silent gap."""
    gen = answered_requests(prompts)
    rows = []
    for model, comp in sorted(completions.items()):
        rows += [
            {"instance_id": iid, "request_id": rid, "instruction": inp, "model": model, "answer": _cut(text, max_chars)}
            for iid, rid, inp, text in zip(
                gen["instance_id"], gen["request_id"], gen["input"], answers(model, comp, list(gen["request_id"]))
            )
        ]
    return pd.DataFrame(rows, columns=["instance_id", "request_id", "instruction", "model", "answer"])


def judge_prompts(answers: pd.DataFrame, prompt: JudgePrompt) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The judgements to make, and the model requests that make them (run_requests' rows).

    generate: one request per judgement (request_id = judgement_id). logprob: one loglikelihood
    request per label, the label as the continuation of the judge prompt."""
    judgements = judge_requests(answers, prompt)
    rid = answers.drop_duplicates("instance_id").set_index("instance_id")["request_id"]
    judgements = judgements.assign(answered=judgements["instance_id"].map(rid))
    if prompt.method == "generate":
        reqs = pd.DataFrame(
            {
                "judgement_id": judgements["judgement_id"],
                "label": None,
                "request_id": judgements["judgement_id"],
                "method": "generate",
                "prompt": judgements["prompt"],
                "continuation": None,
                "max_tokens": prompt.max_tokens,
                "stop": [list(prompt.stop)] * len(judgements),
            }
        )
    else:
        rows = [
            {
                "judgement_id": j,
                "label": label,
                "request_id": stable_id([j, label]),
                "method": "loglikelihood",
                "prompt": text,
                "continuation": label,
                "max_tokens": None,
                "stop": [],
            }
            for j, text in zip(judgements["judgement_id"], judgements["prompt"])
            for label in prompt.labels
        ]
        reqs = pd.DataFrame(rows)
    return judgements, reqs


def verdict_table(
    judgements: pd.DataFrame, reqs: pd.DataFrame, outputs: pa.Table, prompt: JudgePrompt, judge: str, judge_sha256: str
) -> pa.Table:
    """One row per judgement: the judge's raw output (text, or each label's logprob) and the verdict."""
    out = reqs[["judgement_id", "label"]].assign(
        **outputs.select(["text", "logprob", "num_prompt_tokens", "truncated_tokens"]).to_pandas()
    )
    rows = []
    for j, group in out.groupby("judgement_id", sort=False):
        first = group.iloc[0]
        if prompt.method == "generate":
            text, lps, verdict, margin = first["text"], None, parse_verdict(first["text"], prompt), None
        else:
            lps = dict(zip(group["label"], group["logprob"].astype(float)))
            text, verdict = None, prompt.labels[max(prompt.labels, key=lambda k: lps[k])]
            margin = lps[prompt.label("first")] - lps[prompt.label("second")]
        rows.append(
            {
                "judgement_id": j,
                "output": text,
                "verdict": verdict,
                "margin": margin,
                "label_logprobs": None if lps is None else [lps[k] for k in prompt.labels],
                "num_prompt_tokens": int(first["num_prompt_tokens"]),
                "truncated_tokens": int(first["truncated_tokens"] or 0),
            }
        )
    made = judgements.merge(pd.DataFrame(rows), on="judgement_id", how="left", validate="one_to_one")
    made = made.rename(columns={"answered": "request_id"}).assign(judge=judge, judge_sha256=judge_sha256)
    made = made.sort_values(["instance_id", "model_a", "model_b", "order"])
    return pa.Table.from_pandas(made[VERDICTS_SCHEMA.names], schema=VERDICTS_SCHEMA, preserve_index=False)


def _num(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), 6)


def summarize(
    verdicts: pd.DataFrame,
    prompt: JudgePrompt,
    samples: int,
    seed: int,
    C: float | None,
    key: str = "battle.<scenario>.penalty_C",
) -> dict:
    """Ratings with CIs, the win-rate matrix, verdict counts and agreement between the two orders."""
    if prompt.method == "logprob":
        battles, stats = battles_from_margins(verdicts, prompt.tie_margin)
    else:
        battles, stats = battles_from_verdicts(verdicts)
    try:
        ratings = arena_ratings(battles, samples, seed, C=C)
    except ValueError as exc:
        raise EvaltrailError(f"params.yaml: {key}: {exc} (set it, e.g. to 1.0)") from None
    wins = win_rate_matrix(battles)
    counts = verdicts["verdict"].fillna("undefined").value_counts()
    by_order = {
        o: {k: int(v) for k, v in g["verdict"].fillna("undefined").value_counts().sort_index().items()}
        for o, g in verdicts.groupby("order", sort=True)
    }
    summary = {
        "judge": str(verdicts["judge"].iloc[0]),
        "judge_sha256": str(verdicts["judge_sha256"].iloc[0]),
        "instances": int(verdicts["instance_id"].nunique()),
        "judgements": int(len(verdicts)),
        "verdicts": {k: int(counts.get(k, 0)) for k in ("first", "second", "tie", "undefined")},
        "verdicts_by_order": by_order,
        "pairs": stats["pairs"],
        "pairs_agreeing": stats["agree"],
        "pairs_undefined": stats["undefined"],
        "agreement": round(stats["agreement"], 6),
        "method": prompt.method,
        **(
            {"tie_margin": prompt.tie_margin, "position_bias": round(stats["position_bias"], 6)}
            if prompt.method == "logprob"
            else {}
        ),
        "outcomes": {k: int(v) for k, v in battles["winner"].value_counts().sort_index().items()},
        "bootstrap_samples": samples,
        "seed": seed,
        "penalty_C": C,
        "degenerate_rounds": ratings.degenerate_rounds,
        "ratings": [
            {"model": m, **{k: _num(v) if k not in ("rank", "battles") else int(v) for k, v in t.items()}}
            for m, t in ratings.table.iterrows()
        ],
        "win_rate": {m: {o: _num(v) for o, v in row.items()} for m, row in wins.iterrows()},
    }
    return summary


def to_markdown(scenario: str, s: dict, level: int = 1) -> str:
    v = s["verdicts"]
    lines = [
        f"{'#' * level} Battles on {scenario}",
        "",
        f"Judge: {s['judge']} (sha256 {s['judge_sha256']}). {s['instances']} instructions, {s['pairs']} pairs, "
        f"{s['judgements']} judgements (each pair in both orders).",
        "",
        f"Verdicts: first {v['first']}, second {v['second']}, tie {v['tie']}, undefined {v['undefined']} "
        f"(no label in the judge's reply; counted, never guessed).",
        f"Agreement between the two orders: {s['pairs_agreeing']} of {s['pairs'] - s['pairs_undefined']} pairs "
        f"with both verdicts ({s['agreement']:.1%}).",
        (
            f"Rule ({s['method']}): the judge's logprob margin for the first answer's label over the second's "
            f"is summed over both orders (model_a's margin when first minus its margin when second), so a "
            f"preference for a position cancels; |sum| <= {s['tie_margin']} is a tie. Mean margin for the first "
            f"position: {s['position_bias']:+.3f} nats."
            if s["method"] == "logprob"
            else "Rule (generate): a pair counts as a win only when both orders name the same model, otherwise a tie."
        ),
        "Outcomes: " + ", ".join(f"{k} {n}" for k, n in s["outcomes"].items()) + ".",
        "",
        f"Bradley-Terry ratings (scale 400, base 10, mean 1000), 95% CI from {s['bootstrap_samples']} seeded "
        f"bootstrap rounds (seed {s['seed']}):",
        "",
        "| rank | model | rating | 95% CI | battles |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['rank']} | {r['model']} | {r['rating']:.1f} | [{r['ci_low']:.1f}, {r['ci_high']:.1f}] | {r['battles']} |"
        for r in s["ratings"]
    ]
    models = sorted(s["win_rate"])
    lines += [
        "",
        "Win rate of the row model against the column model (win 1, tie 1/2):",
        "",
        "| model | " + " | ".join(models) + " |",
        "|---" * (len(models) + 1) + "|",
    ]
    for m in models:
        cells = ["—" if s["win_rate"][m][o] is None else f"{s['win_rate'][m][o]:.2f}" for o in models]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
