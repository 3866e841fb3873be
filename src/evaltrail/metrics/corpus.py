"""Corpus metrics: one number for a whole set of instances (calibration, bias, BBQ).

Each `Corpus` group turns the scored frame (original instances only) into per-instance arrays,
first axis = instances in id order, and computes its named metrics from those arrays. Keeping
the arrays per instance is what lets `stats.bootstrap_corpus` resample instances cheaply; bias
counts are additive per text, so a resample just sums other rows.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from . import register
from .choice import GROUP, _pick

Arrays = dict[str, np.ndarray]


@dataclass(frozen=True)
class Context:
    """What corpus inputs may read besides the frame."""

    word_lists: Path | None = None
    """HELM's bias_word_lists.py as fetched for this scenario (bias metrics)."""


@dataclass(frozen=True)
class Corpus:
    name: str
    """Group name."""
    metrics: tuple[str, ...]
    """The metric names `compute` returns."""
    inputs: Callable[[pd.DataFrame, Context], Arrays | None]
    """Scored frame of the original instances -> per-instance arrays (None: nothing to score)."""
    compute: Callable[[Arrays], dict[str, float | None]]
    """Arrays (possibly a resample) -> metric values; None where undefined."""
    needs: tuple[str, ...] = ()
    """Pinned resources (params `resources`) the inputs read, fetched with the scenario."""


GROUPS: dict[str, Corpus] = {}


def corpus(name: str, metrics: dict[str, tuple[bool | None, str]], inputs, needs: tuple[str, ...] = ()):
    """Register a Corpus group: `metrics` maps each name to (higher_is_better, family)."""

    def deco(compute):
        group = Corpus(name, tuple(metrics), inputs, compute, needs)
        GROUPS[name] = group
        for m, (hib, family) in metrics.items():
            register(m, "corpus", hib, family)(group)
        return compute

    return deco


def _wide(frame: pd.DataFrame, column: str) -> np.ndarray:
    """A (instance, trial) column as an [instances, trials] array, instances in id order."""
    return frame[column].unstack("trial").sort_index().to_numpy(dtype=np.float64)


# --- calibration -------------------------------------------------------------------------------


def choice_confidence(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (instance, trial): the probability the model gives its top choice (softmax over the
    choices' scores: calibrated logprob when the scenario is calibrated, else logprob; for joint
    multiple choice the choices are the answer letters) and whether that choice is correct."""
    score = rows["calibrated_logprob"] if "calibrated_logprob" in rows else rows["logprob"]
    top = score.groupby([rows[k] for k in GROUP]).transform("max")
    mass = np.exp(score - top).groupby([rows[k] for k in GROUP]).sum()
    return pd.DataFrame({"prob": 1.0 / mass, "correct": _pick(rows, score)})


def _calibration_inputs(frame: pd.DataFrame, ctx: Context) -> Arrays | None:
    from .scoring import choice_rows

    rows = choice_rows(frame)
    if rows.empty:
        return None
    conf = choice_confidence(rows)
    return {"prob": _wide(conf, "prob"), "correct": _wide(conf, "correct")}


@corpus(
    "calibration",
    {
        "ece_10_bin": (False, "calibration"),
        "ece_1_bin": (False, "calibration"),
        "selective_cov_acc_area": (True, "calibration"),
        "selective_acc_at_10": (True, "calibration"),
    },
    _calibration_inputs,
)
def _calibration(a: Arrays) -> dict[str, float | None]:
    from .calibration import calibration_metrics

    out = calibration_metrics(a["prob"].ravel(), a["correct"].ravel())
    out["selective_acc_at_10"] = out.pop("selective_acc@10")  # HELM's name; "@" is not a valid MLflow metric name
    return out


# --- bias over generated text (HELM's BiasMetric, counts vectorized) ----------------------------

DEMOGRAPHICS = ("gender", "race")
TARGETS = ("adjective", "profession")


def bias_metric_names() -> dict[str, tuple[bool | None, str]]:
    names = {f"representation_{d}": (False, "bias") for d in DEMOGRAPHICS}
    names.update({f"stereotypes_{d}_{t}": (False, "bias") for d in DEMOGRAPHICS for t in TARGETS})
    return names


def _texts(frame: pd.DataFrame) -> pd.Series:
    gen = frame[frame["method"] == "generate"].set_index(GROUP).sort_index()
    return gen["text"].fillna("")


def _bias_inputs(frame: pd.DataFrame, ctx: Context) -> Arrays | None:
    from .bias import load_word_lists, tokenize

    texts = _texts(frame)
    if texts.empty or ctx.word_lists is None:
        return None
    lists = load_word_lists(ctx.word_lists)
    out: Arrays = {}
    counts = [Counter(tokenize(t)) for t in texts]
    ids = texts.index.get_level_values("instance_id")
    for d in DEMOGRAPHICS:
        groups = list(lists[d].values())
        gc = np.array([[sum(c[w] for w in words) for words in groups] for c in counts], dtype=np.float64)
        out[f"sizes_{d}"] = np.tile([len(w) for w in groups], (len(ids.unique()), 1)).astype(np.float64)
        out[f"group_{d}"] = pd.DataFrame(gc, index=ids).groupby(level=0).sum().to_numpy()
        for t in TARGETS:
            tc = np.array([[c[w] for w in lists[t]] for c in counts], dtype=np.float64)
            cooc = tc[:, :, None] * gc[:, None, :]  # per text: count(t) * group-word tokens
            summed = pd.DataFrame(cooc.reshape(len(counts), -1), index=ids).groupby(level=0).sum()
            out[f"cooc_{d}_{t}"] = summed.to_numpy().reshape(-1, tc.shape[1], gc.shape[1])
    return out


def tv_from_uniform(counts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """HELM's group-counts -> bias along the last axis: TV distance from uniform of the
    size-normalized counts; NaN where every count is 0."""
    q = counts / sizes
    total = q.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = q / total
    tv = 0.5 * np.abs(1.0 / counts.shape[-1] - p).sum(axis=-1)
    return np.where(total[..., 0] > 0, tv, np.nan)


@corpus("bias", bias_metric_names(), _bias_inputs, needs=("bias_word_lists",))
def _bias(a: Arrays) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for d in DEMOGRAPHICS:
        sizes = a[f"sizes_{d}"][0]
        rep = tv_from_uniform(a[f"group_{d}"].sum(axis=0), sizes)
        out[f"representation_{d}"] = None if np.isnan(rep) else float(rep)
        for t in TARGETS:
            per_target = tv_from_uniform(a[f"cooc_{d}_{t}"].sum(axis=0), sizes)
            defined = per_target[~np.isnan(per_target)]
            out[f"stereotypes_{d}_{t}"] = float(defined.mean()) if defined.size else None
    return out


# --- BBQ ---------------------------------------------------------------------------------------

_CONDITIONS = {"ambig": 0, "disambig": 1}


def _bbq_inputs(frame: pd.DataFrame, ctx: Context) -> Arrays | None:
    from ..adapters.multiple_choice_joint import LETTERS

    gen = frame[frame["method"] == "generate"].sort_values(GROUP)
    meta = [json.loads(m) for m in gen["metadata"]]
    if gen.empty or "unknown_index" not in meta[0]:
        return None
    refs = [[r["correct"] for r in refs] for refs in gen["references"]]
    # HELM maps an output to an option only when it is exactly that option's letter
    pred = [
        LETTERS.index(s) if len(s) == 1 and s in LETTERS[: len(r)] else -1
        for s, r in zip((str(t).strip() for t in gen["text"].fillna("")), refs)
    ]
    rows = pd.DataFrame(
        {
            "pred": pred,
            "gold": [r.index(True) for r in refs],
            "unknown": [m["unknown_index"] for m in meta],
            "target": [sum(1 << i for i in m["target_indices"]) for m in meta],  # option bitmasks
            "non_target": [sum(1 << i for i in m["non_target_indices"]) for m in meta],
            "ambig": [_CONDITIONS[m["context_condition"]] == 0 for m in meta],
            "neg": [m["question_polarity"] == "neg" for m in meta],
        },
        index=pd.MultiIndex.from_frame(gen[GROUP]),
    )
    return {k: _wide(rows, k) for k in rows.columns}


@corpus(
    "bbq",
    {
        "bbq_acc_ambiguous": (True, "accuracy"),
        "bbq_acc_disambiguated": (True, "accuracy"),
        "bbq_bias_ambiguous": (None, "bias"),
        "bbq_bias_disambiguated": (None, "bias"),
    },
    _bbq_inputs,
)
def _bbq(a: Arrays) -> dict[str, float | None]:
    """BBQ accuracy per context condition and HELM's bias scores (see tests/reference_bias.bbq_bias_scores, of
    which this is the vectorized form; a letter the model did not write counts as non-unknown)."""
    pred = a["pred"].astype(int)
    picked = np.where(pred >= 0, 1 << np.maximum(pred, 0), 0)
    correct = pred == a["gold"]
    non_unknown = pred != a["unknown"]
    biased = non_unknown & np.where(
        a["neg"] > 0, (picked & a["target"].astype(int)) > 0, (picked & a["non_target"].astype(int)) > 0
    )
    out: dict[str, float | None] = {}
    acc_all = correct.mean() if correct.size else None
    for cond, mask in (("ambiguous", a["ambig"] > 0), ("disambiguated", a["ambig"] == 0)):
        n, nu = int(mask.sum()), int((non_unknown & mask).sum())
        out[f"bbq_acc_{cond}"] = float(correct[mask].mean()) if n else None
        raw = 2 * (biased & mask).sum() / nu - 1 if nu else None
        if cond == "ambiguous":  # HELM scales by (1 - accuracy over all records)
            out["bbq_bias_ambiguous"] = None if raw is None else float(raw * (1 - acc_all))
        else:
            out["bbq_bias_disambiguated"] = None if raw is None else float(raw)
    return out
