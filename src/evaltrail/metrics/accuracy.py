"""Accuracy (HELM's family): how often, or how closely, a model's answer matches the gold.

Three kinds of per-instance metric, one section each:
- ``choice``: multiple choice by loglikelihood. The model's pick is the option ranked highest by
  the metric's `ChoiceRule` (ties break to the lowest choice index); 1.0 when it is correct.
  The report shows the same pick through `picks`, so what it displays is what was scored.
- ``reference``: ``(gold, pred) -> float`` on generated text, as HELM defines them.
- ``lm``: language modeling over rolling loglikelihoods (one row per document).
- ``code``: functional correctness: the prompt and its completion, then the problem's unit test,
  run in evaltrail.sandbox (generated code is untrusted).
"""

from __future__ import annotations

import math
import re
import string
import warnings
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import numpy as np
import pandas as pd

from .. import sandbox
from .bias import treebank  # nltk's Treebank tokenizer: pure regex, no nltk data download
from .registry import GROUP, register

# --- multiple choice by loglikelihood ----------------------------------------------------------


def choice_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The per-option loglikelihood rows (separate multiple choice, or joint multiple choice's
    letter probes) with `correct`, and `calibrated_logprob` when the scenario is calibrated."""
    rows = frame[(frame["method"] == "loglikelihood") & ~frame["calibration"].astype(bool)].copy()
    rows["correct"] = [bool(refs[int(i)]["correct"]) for refs, i in zip(rows["references"], rows["choice_index"])]
    cal = frame[(frame["method"] == "loglikelihood") & frame["calibration"].astype(bool)]
    if len(cal):
        keys = ["instance_id", "trial", "choice_index"]
        base = cal.set_index(keys)["logprob"].rename("_cal")
        rows = rows.join(base, on=keys)
        rows["calibrated_logprob"] = rows["logprob"] - rows["_cal"]
    return rows


def _best(rows: pd.DataFrame, score: pd.Series) -> pd.DataFrame:
    """Per (instance, trial) the row of the highest-scoring option, ties to the lowest index."""
    ordered = rows.assign(_score=score).sort_values(
        GROUP + ["_score", "choice_index"], ascending=[True] * len(GROUP) + [False, True]
    )
    return ordered.groupby(GROUP, sort=True).head(1).set_index(GROUP)


def pick_correct(rows: pd.DataFrame, score: pd.Series) -> pd.Series:
    """Per (instance, trial): 1.0 when the highest-scoring option is correct."""
    return _best(rows, score)["correct"].astype(float)


@dataclass(frozen=True)
class ChoiceRule:
    """How a choice metric ranks an instance's options."""

    score: Callable[[pd.DataFrame], pd.Series]
    """Choice rows -> the score each option is ranked by."""
    describe: Callable[[bool], str]
    """(scenario is calibrated) -> the rule in words, for the report's reader."""


CHOICE_RULES: dict[str, ChoiceRule] = {}


def _choice_metric(name: str, describe: Callable[[bool], str]):
    """Register a choice metric scored by the rule `score` and remember the rule for `picks`."""

    def deco(score: Callable[[pd.DataFrame], pd.Series]):
        CHOICE_RULES[name] = ChoiceRule(score, describe)
        metric = lambda rows: pick_correct(rows, score(rows))  # noqa: E731
        metric.__doc__ = score.__doc__
        register(name, "choice")(metric)
        return score

    return deco


@_choice_metric("acc", lambda calibrated: "highest calibrated logprob" if calibrated else "highest logprob")
def acc(rows: pd.DataFrame) -> pd.Series:
    """Argmax of the continuation's logprob; for a calibrated scenario, of logprob minus the
    option's logprob after the bare calibration prompt."""
    return rows["calibrated_logprob"] if "calibrated_logprob" in rows else rows["logprob"]


@_choice_metric("acc_norm", lambda calibrated: "highest logprob per character (acc_norm)")
def acc_norm(rows: pd.DataFrame) -> pd.Series:
    """Argmax of logprob divided by the continuation's length in characters, its leading space
    included: lighteval's `loglikelihood_acc_norm` (LogProbCharNorm(), normalizations.py), not
    lm-eval's acc_norm (see acc_norm_nospace)."""
    return rows["logprob"] / rows["continuation"].str.len()


@_choice_metric("acc_norm_nospace", lambda calibrated: "highest logprob per character of the option (acc_norm_nospace)")
def acc_norm_nospace(rows: pd.DataFrame) -> pd.Series:
    """Argmax of logprob divided by the option's length in characters, the space that joins it to
    the prompt not counted (the logprob still covers it): lm-eval's acc_norm
    (ConfigurableTask.process_results, lm_eval/api/task.py, divides by len(choice) while scoring
    target_delimiter + choice) and lighteval's `loglikelihood_acc_norm_nospace`
    (LogProbCharNorm(ignore_first_space=True)), which the SmolLM2 card's evaluation uses."""
    cont = rows["continuation"]
    return rows["logprob"] / (cont.str.len() - cont.str.startswith(" ").astype(int))


@_choice_metric("acc_bytes", lambda calibrated: "highest logprob per UTF-8 byte (acc_bytes)")
def acc_bytes(rows: pd.DataFrame) -> pd.Series:
    """Argmax of logprob divided by the continuation's length in UTF-8 bytes."""
    return rows["logprob"] / rows["continuation"].map(lambda s: len(s.encode("utf-8")))


def choice_rule(metric: str | None) -> ChoiceRule:
    """The rule a scenario's main metric picks by; acc's (highest logprob) for any other metric."""
    return CHOICE_RULES.get(metric or "", CHOICE_RULES["acc"])


def picks(rows: pd.DataFrame, metric: str | None) -> pd.Series:
    """Per (instance, trial): the choice_index the model picks under `metric`'s rule."""
    if rows.empty:
        return pd.Series(dtype=int)
    return _best(rows, choice_rule(metric).score(rows))["choice_index"].astype(int)


# --- generated text against references (HELM's definitions) ------------------------------------

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_NUMBER = re.compile(r"-?[\d,]*\.?\d+")


def normalize_text(text: str) -> str:
    """HELM's normalization: lowercase, drop ASCII punctuation, drop articles, fold whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


@register("exact_match", "reference")
def exact_match(gold: str, pred: str) -> float:
    """1 when the stripped prediction equals the stripped gold (HELM's exact_match); an empty
    prediction scores 0, even against an empty gold."""
    if not pred:
        return 0.0
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


@register("prefix_exact_match", "reference")
def prefix_exact_match(gold: str, pred: str) -> float:
    """1 when the stripped prediction starts with the stripped gold; an empty prediction scores 0."""
    if not pred:
        return 0.0
    return float(pred.strip().startswith(gold.strip()))


@register("quasi_prefix_exact_match", "reference")
def quasi_prefix_exact_match(gold: str, pred: str) -> float:
    """1 when the normalized prediction starts with the normalized gold; empty prediction scores 0."""
    if not pred:
        return 0.0
    return float(normalize_text(pred).startswith(normalize_text(gold)))


@register("squad_f1", "reference")
def squad_f1(gold: str, pred: str) -> float:
    """SQuAD v1.1 F1 (HELM's squad_f1_score) over *bags* of normalized tokens; 0 if none shared."""
    g, p = normalize_text(gold).split(), normalize_text(pred).split()
    common = sum((Counter(g) & Counter(p)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


_ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")


@lru_cache(maxsize=1)
def _rouge():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(list(_ROUGE_TYPES), use_stemmer=True)


@lru_cache(maxsize=4096)
def _rouge_f(gold: str, pred: str) -> dict[str, float]:
    # one scoring pass serves rouge_1, rouge_2 and rouge_l of the same pair
    return {k: float(v.fmeasure) for k, v in _rouge().score(gold, pred).items()}


@register("rouge_1", "reference")
def rouge_1(gold: str, pred: str) -> float:
    """ROUGE-1 F-measure from the `rouge-score` package, Porter stemmer on (as HELM)."""
    return _rouge_f(gold, pred)["rouge1"]


@register("rouge_2", "reference")
def rouge_2(gold: str, pred: str) -> float:
    """ROUGE-2 F-measure from the `rouge-score` package, Porter stemmer on (as HELM)."""
    return _rouge_f(gold, pred)["rouge2"]


@register("rouge_l", "reference")
def rouge_l(gold: str, pred: str) -> float:
    """ROUGE-L F-measure from the `rouge-score` package, Porter stemmer on (as HELM)."""
    return _rouge_f(gold, pred)["rougeL"]


# A word ending a sentence: ends in . ! or ? (then closing quotes/brackets) and holds no other
# period, so "U.S." and "e.g." do not end one, nor does "3.5".
_SENTENCE_FINAL = re.compile(r"[^.]*[.!?][\"')\]}]*")


def _sentences(text: str) -> list[str]:
    out, current = [], ""
    for chunk in re.findall(r"\s*\S+\s*", text):
        current += chunk
        if chunk[-1].isspace() and _SENTENCE_FINAL.fullmatch(chunk.strip()):
            out.append(current)
            current = ""
    return out + [current]


def word_tokenize(text: str) -> list[str]:
    """nltk's ``word_tokenize`` with a rule-based sentence splitter in place of Punkt.

    ``nltk.word_tokenize`` splits sentences with Punkt (whose ``punkt_tab`` data must be
    downloaded, impossible offline) and runs the Treebank tokenizer on each; Treebank splits a
    period off only at the end of its input. Here a sentence ends after a whitespace-delimited
    word that ends in ``.``, ``!`` or ``?`` (then closing quotes or brackets) and holds no other
    period. Tokens equal nltk's on a single sentence, and on several except where Punkt and the
    rule disagree on a sentence end: abbreviations without an inner period ("Dr. Smith": HELM
    keeps ``Dr.``, this gives ``Dr``, ``.``) and Punkt's finer cases (ordinals, initials).
    """
    return [tok for s in _sentences(text) for tok in treebank().tokenize(s)]


def _bleu(gold: str, pred: str, weights: tuple[float, ...]) -> float:
    from nltk.translate.bleu_score import sentence_bleu

    with warnings.catch_warnings():
        # nltk warns on every zero n-gram count. Unsmoothed, such a count enters as float_min, so
        # bleu_4 without a matching 4-gram is ~1e-308 rather than 0: HELM's number too.
        warnings.simplefilter("ignore")
        return float(sentence_bleu([word_tokenize(gold)], word_tokenize(pred), weights=weights))


@register("bleu_1", "reference")
def bleu_1(gold: str, pred: str) -> float:
    """HELM's BLEU-1: nltk sentence_bleu, weights (1,0,0,0), no smoothing, Punkt-free word_tokenize."""
    return _bleu(gold, pred, (1, 0, 0, 0))


@register("bleu_4", "reference")
def bleu_4(gold: str, pred: str) -> float:
    """HELM's BLEU-4: nltk sentence_bleu, weights (0,0,0,1), no smoothing, Punkt-free word_tokenize."""
    return _bleu(gold, pred, (0, 0, 0, 1))


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


# --- language modeling over rolling loglikelihoods ---------------------------------------------
# The frame has columns instance_id, trial, logprob (natural log, summed over every token of the
# document), num_output_tokens (tokens scored) and prompt (the document text).


def _indexed(frame: pd.DataFrame, values) -> pd.Series:
    return pd.Series(np.asarray(values, dtype=float), index=pd.MultiIndex.from_frame(frame[GROUP]))


@register("bits_per_byte", "lm", higher_is_better=False)
def bits_per_byte(frame: pd.DataFrame) -> pd.Series:
    """-log2 p(document) / UTF-8 bytes of the document: comparable across tokenizers."""
    n_bytes = frame["prompt"].map(lambda s: len(s.encode("utf-8")))
    return _indexed(frame, -frame["logprob"] / math.log(2) / n_bytes)


@register("perplexity", "lm", higher_is_better=False)
def perplexity(frame: pd.DataFrame) -> pd.Series:
    """exp(-logprob / tokens): token-level, so it depends on the model's tokenizer."""
    return _indexed(frame, np.exp(-frame["logprob"] / frame["num_output_tokens"]))


# --- code: the completion must pass the problem's unit test ------------------------------------


FINISHED = "evaltrail: the test ran to its end"
"""Printed after check(): only a program that gets there passes (see sandbox.run_python)."""


def program(prompt: str, completion: str, test: str, entry_point: str) -> str:
    """What HumanEval executes: the prompt, the completion, the test, check(<the function>), and
    the line that says the test ran to its end."""
    return f"{prompt}{completion}\n\n{test}\n\ncheck({entry_point})\nprint({FINISHED!r})\n"


@lru_cache(maxsize=8192)
def _run(source: str) -> sandbox.Outcome:
    return sandbox.run_python(source, finished=FINISHED)


def code_outcomes(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (instance, trial) of the generate rows: whether the completed program passes its test in
    the sandbox, and why not (memoized: the summary reads the reasons without running it again)."""
    import json

    from tqdm import tqdm

    out = []
    for r in tqdm(rows.itertuples(), total=len(rows), desc="sandboxed unit tests", unit="program", leave=False):
        meta = json.loads(r.metadata)
        outcome = _run(program(r.prompt, str(r.text or ""), meta["test"], meta["entry_point"]))
        out.append((r.instance_id, r.trial, float(outcome.passed), outcome.reason))
    frame = pd.DataFrame(out, columns=[*GROUP, "passed", "reason"])
    return frame.set_index(GROUP)


@register("pass_at_1", "code")
def pass_at_1(rows: pd.DataFrame) -> pd.Series:
    """1.0 when the completion passes the problem's unit test in the sandbox. With the greedy answer
    this is HELM's HumanEval pass@1; with num_samples answers (one per trial) its mean over trials is
    c / n, the unbiased pass@1 estimate."""
    return code_outcomes(rows)["passed"]


def pass_at_k_estimate(n: int, c: int, k: int) -> float:
    """Chen et al. (2021)'s unbiased estimate of pass@k from n samples of which c pass:
    1 - C(n - c, k) / C(n, k), computed as a product so no binomial overflows."""
    if n - c < k:
        return 1.0
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


PASS_AT_K = (5, 10, 100)
"""The k of the registered pass_at_<k> metrics (Codex reported 1, 10 and 100)."""


def _pass_at(k: int):
    def metric(rows: pd.DataFrame) -> pd.Series:
        passed = code_outcomes(rows)["passed"].groupby(level="instance_id", sort=True).agg(["size", "sum"])
        passed = passed[passed["size"] >= k]  # fewer samples than k: undefined, left out
        values = [pass_at_k_estimate(int(n), int(c), k) for n, c in zip(passed["size"], passed["sum"])]
        at = pd.MultiIndex.from_arrays([passed.index, np.zeros(len(passed), dtype=np.int32)], names=GROUP)
        return pd.Series(values, index=at, dtype=float)  # one value per instance, at trial 0

    metric.__doc__ = (
        f"The unbiased pass@{k} of an instance's num_samples answers (one per trial; defined when there "
        f"are at least {k}): the chance that one of {k} drawn without replacement passes."
    )
    return metric


for _k in PASS_AT_K:
    register(f"pass_at_{_k}", "code")(_pass_at(_k))
