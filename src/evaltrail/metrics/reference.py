"""Reference metrics on generated text: (gold, pred) -> float, as HELM defines them."""

from __future__ import annotations

import re
import string
from functools import lru_cache

from . import register

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_NUMBER = re.compile(r"-?[\d,]*\.?\d+")


def normalize_text(text: str) -> str:
    """HELM's normalization: lowercase, drop ASCII punctuation, drop articles, fold whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


@register("exact_match", "reference")
def exact_match(gold: str, pred: str) -> float:
    """1 when the stripped prediction equals the stripped gold (HELM's exact_match)."""
    return float(gold.strip() == pred.strip())


@register("quasi_exact_match", "reference")
def quasi_exact_match(gold: str, pred: str) -> float:
    """Exact match after HELM's normalization; an empty prediction scores 0."""
    if not pred:
        return 0.0
    return float(normalize_text(gold) == normalize_text(pred))


@register("f1_score", "reference")
def f1_score(gold: str, pred: str) -> float:
    """HELM's F1: over the *sets* of normalized tokens; 0 when either side is empty."""
    g, p = set(normalize_text(gold).split()), set(normalize_text(pred).split())
    common = len(g & p)
    if not g or not p or common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


@lru_cache(maxsize=1)
def _rouge():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


@register("rouge_l", "reference")
def rouge_l(gold: str, pred: str) -> float:
    """ROUGE-L F-measure from the `rouge-score` package, Porter stemmer on (as HELM)."""
    return float(_rouge().score(gold, pred)["rougeL"].fmeasure)


def final_number(text: str) -> str | None:
    """The last number in the text, commas dropped ("1,200.50" -> "1200.50")."""
    found = _NUMBER.findall(text)
    return found[-1].replace(",", "") if found else None


@register("final_number_exact_match", "reference")
def final_number_exact_match(gold: str, pred: str) -> float:
    """GSM8K: the last number of the prediction equals the last number of the gold solution."""
    g, p = final_number(gold), final_number(pred)
    if g is None or p is None:
        return 0.0
    try:
        return float(float(g) == float(p))
    except ValueError:
        return float(g == p)
