"""Arena-style pairwise judging: the judge requests, their verdicts, and battles from both orders.

Every pair of models that answered the same instance is judged twice, once with each answer in
first position; a pair's battle counts a win only when both orders name the same model, and a
tie otherwise (position bias cancels instead of deciding). Verdicts and the judge's raw output
are kept per order, so a rating traces back to each judgement. Pure functions: the battle stage
runs the requests through any backend and stores what these return.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import combinations

import pandas as pd

from ..errors import EvaltrailError
from ..hashing import stable_id

ORDERS = ("ab", "ba")
"""ab: model_a's answer shown first; ba: model_b's answer shown first."""


@dataclass(frozen=True)
class JudgePrompt:
    template: str
    """The judge's prompt; {instruction}, {first} and {second} are filled per judgement."""
    labels: dict = field(default_factory=lambda: {"A": "first", "B": "second", "C": "tie"})
    """What the judge may answer, mapped to first / second / tie; the first label in its output counts."""
    max_tokens: int = 8
    """Generation budget of one verdict."""
    stop: list = field(default_factory=lambda: ["\n"])
    """Stop sequences of the verdict generation."""
    method: str = "generate"
    """generate: the judge writes its verdict; logprob: the judge's logprob of each label is read, and
    a pair is decided by the margin summed over both orders (`battles_from_margins`)."""
    tie_margin: float = 0.0
    """logprob: a summed margin (nats) at most this far from 0 is a tie."""

    def __post_init__(self):
        missing = [k for k in ("{instruction}", "{first}", "{second}") if k not in self.template]
        if missing:
            raise EvaltrailError(f"judge prompt template lacks {missing[0]}")
        bad = sorted(set(self.labels.values()) - {"first", "second", "tie"})
        if bad or not self.labels:
            raise EvaltrailError(f"judge prompt labels must map to first/second/tie, got {bad or 'none'}")
        if self.method not in ("generate", "logprob"):
            raise EvaltrailError(f"judge method {self.method!r}: use generate or logprob")
        sides = list(self.labels.values())
        if self.method == "logprob" and (sides.count("first") != 1 or sides.count("second") != 1):
            raise EvaltrailError("judge method logprob needs exactly one label for first and one for second")

    def label(self, side: str) -> str:
        """The (first) label that names `side`."""
        return next(k for k, v in self.labels.items() if v == side)


def judge_requests(answers: pd.DataFrame, prompt: JudgePrompt) -> pd.DataFrame:
    """One row per (instance, pair of models, order) to judge.

    `answers`: columns instance_id, instruction, model, answer (one row per model and instance).
    Returns judgement_id (content hash), instance_id, model_a < model_b, order, prompt."""
    dup = answers.duplicated(["instance_id", "model"])
    if dup.any():
        raise EvaltrailError(f"two answers of one model to instance {answers.loc[dup, 'instance_id'].iloc[0]}")
    rows = []
    for iid, group in answers.sort_values(["instance_id", "model"]).groupby("instance_id", sort=True):
        by_model = dict(zip(group["model"], group["answer"]))
        instruction = group["instruction"].iloc[0]
        for a, b in combinations(sorted(by_model), 2):
            for order in ORDERS:
                first, second = (by_model[a], by_model[b]) if order == "ab" else (by_model[b], by_model[a])
                text = prompt.template.format(instruction=instruction, first=first, second=second)
                rows.append(
                    {
                        "judgement_id": stable_id([iid, a, b, order, text]),
                        "instance_id": iid,
                        "model_a": a,
                        "model_b": b,
                        "order": order,
                        "prompt": text,
                    }
                )
    return pd.DataFrame(rows, columns=["judgement_id", "instance_id", "model_a", "model_b", "order", "prompt"])


def parse_verdict(output: str, prompt: JudgePrompt) -> str | None:
    """first / second / tie from the earliest label in the judge's output (whole word); None if none."""
    pattern = r"\b(" + "|".join(re.escape(k) for k in sorted(prompt.labels, key=len, reverse=True)) + r")\b"
    hit = re.search(pattern, output or "")
    return prompt.labels[hit.group(1)] if hit else None


def _winner(verdict: str | None, order: str) -> str | None:
    """A verdict about positions, as model_a / model_b / tie."""
    if verdict is None or pd.isna(verdict):  # pandas stores a missing verdict as NaN
        return None
    if verdict == "tie":
        return "tie"
    first_is_a = order == "ab"
    return "model_a" if (verdict == "first") == first_is_a else "model_b"


def battles_from_verdicts(verdicts: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """Battles (instance_id, model_a, model_b, winner) from judgements of both orders, and agreement.

    `verdicts`: judge_requests' rows plus `verdict` (first / second / tie / None). A pair wins only
    when both orders name it; disagreement, or an order without a verdict, is a tie. Agreement:
    the share of pairs whose two orders gave the same winner (undefined ones counted apart)."""
    v = verdicts.assign(winner=[_winner(x, o) for x, o in zip(verdicts["verdict"], verdicts["order"])])
    wide = v.pivot(index=["instance_id", "model_a", "model_b"], columns="order", values="winner")
    wide = wide.reindex(columns=list(ORDERS))  # an order never judged is missing, like an unparsed one
    missing = wide.isna().any(axis=1)
    agree = (~missing) & (wide["ab"] == wide["ba"])
    winner = wide["ab"].where(agree, "tie")
    out = winner.rename("winner").reset_index()
    stats = {
        "pairs": int(len(wide)),
        "agree": int(agree.sum()),
        "undefined": int(missing.sum()),
        "agreement": float(agree.sum() / max(1, (~missing).sum())),
    }
    return out.sort_values(["instance_id", "model_a", "model_b"]).reset_index(drop=True), stats


def battles_from_margins(verdicts: pd.DataFrame, tie_margin: float) -> tuple[pd.DataFrame, dict]:
    """Battles from the judge's label logprobs: position bias cancels by subtraction.

    `verdicts`: rows per order with `margin` = logprob(label of the first answer) - logprob(label of
    the second). For a pair, model_a's advantage is margin(ab) - margin(ba): a constant preference
    for whichever answer comes first adds to both and drops out. Above `tie_margin` model_a wins,
    below -tie_margin model_b, otherwise a tie. Agreement stats are those of the per-order argmax
    verdicts (how often the judge, read naively, names the same model in both orders)."""
    _, stats = battles_from_verdicts(verdicts)
    wide = verdicts.pivot(index=["instance_id", "model_a", "model_b"], columns="order", values="margin")
    wide = wide.reindex(columns=list(ORDERS))
    adv = wide["ab"] - wide["ba"]
    winner = pd.Series("tie", index=wide.index)
    winner[adv > tie_margin] = "model_a"
    winner[adv < -tie_margin] = "model_b"
    out = winner.rename("winner").reset_index()
    stats["position_bias"] = float(verdicts["margin"].mean())  # mean preference for the first position
    return out.sort_values(["instance_id", "model_a", "model_b"]).reset_index(drop=True), stats


def win_rate_matrix(battles: pd.DataFrame) -> pd.DataFrame:
    """Row model's share of points against the column model (win 1, tie ½) over their battles."""
    models = sorted(set(battles["model_a"]) | set(battles["model_b"]))
    points = pd.DataFrame(0.0, index=models, columns=models)
    games = pd.DataFrame(0, index=models, columns=models)
    for a, b, w in battles[["model_a", "model_b", "winner"]].itertuples(index=False):
        pa = 1.0 if w == "model_a" else 0.5 if w == "tie" else 0.0
        points.loc[a, b] += pa
        points.loc[b, a] += 1.0 - pa
        games.loc[a, b] += 1
        games.loc[b, a] += 1
    return (points / games.where(games > 0)).rename_axis(index="model", columns="opponent")
