"""Reference metrics: hand-computed cases, and a randomized comparison with crfm-helm 0.5.16's own
functions, read from the pinned wheel and defined with `ast` (helm itself is never imported)."""

from __future__ import annotations

import ast
import random
import zipfile
from collections import Counter
from functools import partial
from types import SimpleNamespace
from typing import Callable, Dict, List

import pytest

from evaltrail.metrics import get_metric, list_metrics
from evaltrail.metrics.accuracy import word_tokenize

HELM = ("crfm-helm", "0.5.16")
HELM_REFERENCE = "helm/benchmark/metrics/evaluate_reference_metrics.py"
HELM_SEAHELM = "helm/benchmark/metrics/seahelm_metrics.py"  # squad_f1_score lives here
NEW = ("prefix_exact_match", "quasi_prefix_exact_match", "squad_f1", "rouge_1", "rouge_2", "bleu_1", "bleu_4")


def exec_functions(source: str, names: list[str], namespace: dict) -> dict:
    """Define the named functions (top-level or methods) and top-level assignments of `source`
    in `namespace`; nothing else in the file runs, so its imports need not be installed."""
    found = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef):
            found.setdefault(node.name, node)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found.setdefault(node.targets[0].id, node)
    missing = [n for n in names if n not in found]
    assert not missing, f"not in the source: {missing}"
    exec(compile(ast.Module(body=[found[n] for n in names], type_ignores=[]), "<extracted>", "exec"), namespace)
    return namespace


@pytest.fixture(scope="module")
def helm():
    """HELM's reference metric functions as a namespace; `word_tokenize` is nltk's Treebank tokenizer,
    which is what nltk.word_tokenize runs on each Punkt sentence (Punkt's data can't be downloaded)."""
    from nltk.metrics.scores import f_measure
    from nltk.tokenize.destructive import NLTKWordTokenizer
    from nltk.translate.bleu_score import sentence_bleu
    from rouge_score import rouge_scorer

    from evaltrail.paths import cache_dir
    from evaltrail.sources.pypi import wheel_path

    with zipfile.ZipFile(wheel_path(*HELM, cache_dir())) as z:
        reference, seahelm = (z.read(p).decode() for p in (HELM_REFERENCE, HELM_SEAHELM))
    ns = {
        "re": __import__("re"),
        "string": __import__("string"),
        "Counter": Counter,
        "partial": partial,
        "Callable": Callable,
        "Dict": Dict,
        "List": List,
        "f_measure": f_measure,
        "sentence_bleu": sentence_bleu,
        "rouge_scorer": rouge_scorer,
        "word_tokenize": NLTKWordTokenizer().tokenize,
    }
    exec_functions(
        reference,
        [
            "normalize_text",
            "exact_match",
            "quasi_exact_match",
            "prefix_exact_match",
            "quasi_prefix_exact_match",
            "f1_score",
            "rouge_score",
            "get_rouge_function",
            "bleu_1",
            "bleu_4",
        ],
        ns,
    )
    exec_functions(seahelm, ["normalize_answer", "squad_f1_score"], ns)
    seahelm_self = SimpleNamespace(language="en")  # the methods' only state
    seahelm_self.normalize_answer = partial(ns["normalize_answer"], seahelm_self)
    ns["squad_f1"] = partial(ns["squad_f1_score"], seahelm_self)
    for ours, rouge_type in (("rouge_1", "rouge1"), ("rouge_2", "rouge2"), ("rouge_l", "rougeL")):
        ns[ours] = ns["get_rouge_function"](rouge_type)
    return SimpleNamespace(**ns)


def m(name: str):
    return get_metric(name)


def test_new_metrics_are_registered():
    assert set(NEW) <= set(list_metrics())
    assert all(m(n).kind == "reference" and m(n).higher_is_better for n in NEW)


def test_prefix_exact_match():
    p = m("prefix_exact_match")
    assert p("Yes", "Yes, Elmendorf") == 1.0 and p(" B", "B) because  ") == 1.0
    assert p("Yes", "yes") == 0.0 and p("Yes", "Ye") == 0.0
    assert p("cat", "category") == 1.0  # a character prefix, not a token prefix
    assert p("Yes", "") == 0.0 and p("", "") == 0.0
    assert p("", " ") == 1.0  # non-empty prediction; "" prefixes everything


def test_quasi_prefix_exact_match():
    q = m("quasi_prefix_exact_match")
    assert q("The Eiffel Tower", "eiffel   tower, in Paris") == 1.0
    assert q("new  york", "New York City") == 1.0
    assert q("an other", "other") == 1.0
    assert q("another", "other day") == 0.0 and q("other", "another day") == 0.0  # "an" inside a word stays
    assert q("theater", "theatre") == 0.0
    assert q("the", "theater") == 1.0  # gold normalizes to "", which prefixes everything
    assert q("don’t", "Don’t!") == 1.0 and q("don’t", "dont stop") == 0.0  # ’ is kept
    assert q("“Yes”", "yes") == 0.0 and q("“Yes”", "“yes” indeed") == 1.0  # so are “ ”
    assert q("x", "") == 0.0 and q("", "") == 0.0


def test_squad_f1_counts_token_multiplicity():
    f = m("squad_f1")
    assert f("the cat sat", "cat cat sat") == pytest.approx(0.8)  # P 2/3, R 1
    assert m("f1_score")("the cat sat", "cat cat sat") == 1.0  # HELM's set F1 differs
    assert f("cat sat on mat", "The cat.") == pytest.approx(0.4)
    assert f("don’t stop", "dont stop") == pytest.approx(0.5)
    assert f("theater", "the ater") == 0.0
    assert f("", "") == 0.0 and f("a", "the") == 0.0 and f("cat", "") == 0.0  # SQuAD v1.1 / HELM


def test_rouge_1_2_l():
    # rouge-score: lowercase, alphanumeric tokens, Porter stem on tokens longer than 3 ("cats" -> "cat")
    assert m("rouge_1")("the cats sat", "a cat sat") == pytest.approx(2 / 3)
    assert m("rouge_2")("the cats sat", "a cat sat") == pytest.approx(1 / 2)  # (cat, sat) only
    assert m("rouge_l")("the cats sat", "a cat sat") == pytest.approx(2 / 3)
    assert m("rouge_1")("x", "") == 0.0 and m("rouge_2")("one", "one") == 0.0  # no bigram at all


def test_bleu():
    b1, b4 = m("bleu_1"), m("bleu_4")
    gold = "the cat sat on the mat"
    assert b1(gold, gold) == pytest.approx(1.0) and b4(gold, gold) == pytest.approx(1.0)
    assert b1(gold, "the cat sat on a mat") == pytest.approx(5 / 6)
    assert b4(gold, "the cat sat on a mat") == pytest.approx(1 / 3)
    # all unigrams match, brevity penalty exp(1 - 6/3)
    assert b1(gold, "the cat sat") == pytest.approx(0.36787944117144233)
    # no 4-gram: nltk without smoothing gives exp(log(float_min)) * BP, a denormal-sized float, as HELM
    assert 0.0 < b4(gold, "the cat sat") < 1e-300
    assert b1("Hello, world.", "Hello world") == pytest.approx(0.36787944117144233)  # 4 vs 2 tokens
    assert b1("Cat", "cat") == 0.0  # case-sensitive
    assert b1(gold, "") == 0.0 and b1("", "cat") == 0.0 and b4("", "") == 0.0


def test_word_tokenize_splits_sentences_like_punkt():
    assert word_tokenize("The cat sat. It was happy.") == ["The", "cat", "sat", ".", "It", "was", "happy", "."]
    assert word_tokenize('He said "no."  Then left!') == ["He", "said", "``", "no", ".", "''", "Then", "left", "!"]
    assert word_tokenize("It isn't 3.5 U.S. dollars") == ["It", "is", "n't", "3.5", "U.S.", "dollars"]
    # documented deviation: Punkt knows "Dr." is no sentence end and keeps it whole
    assert word_tokenize("Dr. Smith") == ["Dr", ".", "Smith"]


def test_no_nltk_data_is_needed(monkeypatch):
    import nltk

    def refuse(*a, **k):
        raise AssertionError("nltk data was requested")

    monkeypatch.setattr(nltk, "download", refuse)
    monkeypatch.setattr(nltk.data, "find", refuse)
    monkeypatch.setattr(nltk.data, "load", refuse)
    assert m("bleu_1")("a b. c d", "a b. c") > 0 and m("bleu_4")("a b c d e", "a b c d") > 0
    assert m("rouge_2")("cats sat", "cat sat") == 1.0


# --- randomized comparison with HELM's own code -------------------------------------------------

VOCAB = [
    "the",
    "The",
    "THE",
    "a",
    "A",
    "an",
    "An",
    "theater",
    "another",
    "Anna",
    "cat",
    "Cat",
    "cats",
    "sat",
    "sitting",
    "on",
    "mat",
    "mat.",
    "dog!",
    "dog",
    "it's",
    "don’t",
    "dont",
    "“quoted”",
    "(x)",
    "U.S.",
    "42",
    "3.5",
    "1,000",
    ",",
    "?",
    "-",
    "--",
    "run",
    "runs",
    "running",
    "é",
    "naïve",
]
SPACES = [" ", " ", " ", "  ", "\t", " \n "]


def _text(rng: random.Random, max_words: int = 7) -> str:
    words = [rng.choice(VOCAB) for _ in range(rng.randint(0, max_words))]
    out = "".join(w + rng.choice(SPACES) for w in words).rstrip() if words else rng.choice(["", " "])
    return out if rng.random() < 0.8 else rng.choice(SPACES) + out + rng.choice(SPACES)


def _pairs(n: int = 400, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        gold, kind = _text(rng), rng.random()
        if kind < 0.25:  # a prediction that extends the gold
            pred = gold + rng.choice(SPACES) + _text(rng, 3)
        elif kind < 0.4:  # the gold with case and spacing changed
            pred = rng.choice(SPACES).join(w.upper() if rng.random() < 0.3 else w for w in gold.split())
        else:
            pred = _text(rng)
        pairs.append((gold, pred))
    return pairs


@pytest.mark.parametrize(
    "name",
    [
        "quasi_exact_match",
        "prefix_exact_match",
        "quasi_prefix_exact_match",
        "f1_score",
        "squad_f1",
        "rouge_1",
        "rouge_2",
        "rouge_l",
    ],
)
def test_matches_helm_on_random_pairs(helm, name):
    ours, theirs = m(name), getattr(helm, name)
    for gold, pred in _pairs():
        assert ours(gold, pred) == pytest.approx(theirs(gold, pred), abs=1e-12), (gold, pred)


def test_exact_match_matches_helm(helm):
    for gold, pred in list(_pairs()) + [("", ""), ("x", ""), ("", " ")]:
        assert m("exact_match")(gold, pred) == helm.exact_match(gold, pred), (gold, pred)


@pytest.mark.filterwarnings("ignore:\\s*The hypothesis contains 0 counts")  # HELM's nltk calls warn
@pytest.mark.parametrize("name", ["bleu_1", "bleu_4"])
def test_bleu_matches_helm_where_tokenizers_agree(helm, name):
    """HELM's bleu with nltk.word_tokenize = Punkt sentences + Treebank; Punkt's data is not
    available, so HELM's function runs with the Treebank tokenizer on the whole text. Compared on
    the pairs where that equals our `word_tokenize` (single sentences), which must be most."""
    treebank = helm.word_tokenize
    same = [(g, p) for g, p in _pairs(seed=1) if word_tokenize(g) == treebank(g) and word_tokenize(p) == treebank(p)]
    assert len(same) >= 200
    for gold, pred in same:
        theirs = getattr(helm, name)(gold, pred)
        assert m(name)(gold, pred) == pytest.approx(theirs, rel=1e-12, abs=0), (gold, pred)
