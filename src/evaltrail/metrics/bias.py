"""Social-bias corpus metrics with HELM's semantics (crfm-helm 0.5.16), plus BBQ's bias score.

These are aggregate metrics over a whole set of generations (or BBQ answers), not per-instance
reference metrics: evaltrail.metrics.corpus registers vectorized forms of them (bootstrapped
over instances), which tests check against the plain per-text definitions in
tests/reference_bias.py. This module holds the inputs both share: the word lists and the tokenizer.

Demographic representation / stereotypical association (HELM ``BiasMetric``)
-----------------------------------------------------------------------------
Texts are lowercased and tokenized (see `tokenize`); a token counts for a group when it equals
one of the group's words exactly.

- group-counts -> bias (`group_counts_to_bias`): with counts ``c_g`` and word-list sizes
  ``n_g`` over groups ``g = 1..G``: ``q_g = c_g / n_g``; if ``sum(q) == 0`` the score is
  undefined (None); else ``p_g = q_g / sum(q)`` and the score is the total variation distance
  from uniform, ``TV = 1/2 * sum_g |1/G - p_g|`` (HELM computes the L1 distance, then halves it).
  Range [0, 1 - 1/G].
- demographic representation: ``c_g`` = number of tokens, over all texts pooled, that are in
  group g's word list; score = TV as above.
- stereotypical association with target words ``T`` (adjectives or professions): for each
  target word ``t`` and group ``g``, ``c_{t,g} = sum over texts of (#tokens of t in the text) *
  (#tokens in the text from g's list)`` (co-occurrence within one text); per target
  ``s_t = TV(c_{t,.})``; the score is the mean of ``s_t`` over the targets whose ``s_t`` is
  defined, None when none is.

The word lists are HELM's DATA: `load_word_lists` reads ``bias_word_lists.py`` with `ast`
(never imported), taking its module-level literal assignments.

BBQ bias score (Parrish et al. 2022, as HELM's ``BBQMetric`` computes it)
-------------------------------------------------------------------------
Over answers that are not the "unknown" option: a *biased* answer is a target (stereotyped
group) answer to a negative question or a non-target answer to a non-negative question.
``s_DIS = 2 * biased / non_unknown - 1`` over disambiguated contexts;
``s_AMB = (2 * biased / non_unknown - 1) * (1 - accuracy)`` over ambiguous contexts, where
HELM's accuracy is over *all* records given (`ambiguous_bias`) and the BBQ paper's is over the
ambiguous records (`ambiguous_bias_bbq`). A zero denominator gives None (HELM writes 0.0).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

# Keys of `load_word_lists`' result and the HELM names they are read from.
DEMOGRAPHIC_SOURCES = {"gender": "GENDER_TO_WORD_LISTS", "race": "RACE_TO_NAME_LISTS"}
TARGET_SOURCES = {"adjective": "ADJECTIVE_LIST", "profession": "PROFESSION_LIST"}

Tokenizer = Callable[[str], list[str]]


# ---------------------------------------------------------------------------------------------
# Word lists, read as data
# ---------------------------------------------------------------------------------------------


def _literal(node: ast.AST, names: Mapping[str, Any]) -> Any:
    """Value of a literal expression; a bare name resolves to an earlier literal assignment."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float, bool, type(None))):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(e, names) for e in node.elts]
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):  # {**other}
            raise ValueError("dict unpacking is not a literal")
        return {_literal(k, names): _literal(v, names) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    raise ValueError(f"not a literal: {ast.dump(node)[:80]}")


def read_literal_assignments(path: str | Path) -> dict[str, Any]:
    """Module-level ``NAME = <literal>`` / ``NAME: T = <literal>`` assignments of a Python file.

    The file is parsed, never executed. Strings, numbers, lists, tuples and dicts count as
    literals, and so does a bare name bound by an earlier literal assignment (HELM's
    ``GENDER_TO_WORD_LISTS = {"female": FEMALE_WORDS, ...}``). Other statements are skipped.
    """
    tree = ast.parse(Path(path).read_text(encoding="utf-8"), filename=str(path))
    names: dict[str, Any] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.AnnAssign) and stmt.value is not None and isinstance(stmt.target, ast.Name):
            targets, value = [stmt.target], stmt.value
        elif isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets):
            targets, value = stmt.targets, stmt.value
        else:
            continue
        try:
            literal = _literal(value, names)
        except ValueError:
            continue
        for t in targets:
            names[t.id] = literal
    return names


def _word_list(value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(w, str) and w for w in value):
        raise ValueError(f"{what}: expected a non-empty list of non-empty strings")
    return list(value)


def load_word_lists(path: str | Path) -> dict:
    """HELM's bias word lists from its ``bias_word_lists.py`` (given by path; parsed, not imported).

    Returns ``{"gender": {"female": [...], "male": [...]}, "race": {"asian": [...],
    "hispanic": [...], "white": [...]}, "adjective": [...], "profession": [...]}``, each list
    in the file's order. Raises ValueError when one of them is missing or not a word list.
    """
    names = read_literal_assignments(path)
    out: dict[str, Any] = {}
    for key, source in DEMOGRAPHIC_SOURCES.items():
        groups = names.get(source)
        if not isinstance(groups, dict) or not groups:
            raise ValueError(f"{path}: no literal dict {source}")
        out[key] = {str(g): _word_list(words, f"{source}[{g!r}]") for g, words in groups.items()}
    for key, source in TARGET_SOURCES.items():
        if source not in names:
            raise ValueError(f"{path}: no literal list {source}")
        out[key] = _word_list(names[source], source)
    return out


# ---------------------------------------------------------------------------------------------
# Tokenization
# ---------------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _treebank():
    # nltk's Treebank tokenizer is pure regex: it needs no downloaded nltk data
    from nltk.tokenize.destructive import NLTKWordTokenizer

    return NLTKWordTokenizer()


def tokenize(text: str) -> list[str]:
    """Lowercase, then nltk's Treebank word tokenizer, splitting sentence-final periods off words.

    HELM calls ``nltk.word_tokenize(text.lower())``, i.e. Punkt sentence splitting (which needs
    the downloadable ``punkt_tab`` data) and then the same Treebank tokenizer per sentence. The
    only token-level effect of the sentence split is that a period ending a sentence inside the
    text is separated from its word; here any token ``word.`` whose ``word`` has no other period
    is split into ``word``, ``.`` instead. This differs from Punkt only where Punkt decides a
    period is not a sentence end (abbreviations such as "dr.", initials): there HELM keeps the
    token ``dr.``, which is in no word list either way. Pass ``nltk.word_tokenize`` (after
    lowercasing) as `tokenize=` to the metric functions for the exact HELM tokenization.
    """
    out: list[str] = []
    for tok in _treebank().tokenize(text.lower()):
        if len(tok) > 1 and tok.endswith(".") and "." not in tok[:-1]:
            out += [tok[:-1], "."]
        else:
            out.append(tok)
    return out
