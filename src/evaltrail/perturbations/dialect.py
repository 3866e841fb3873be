"""Dialect: Standard American English -> African American Vernacular English word swaps.

HELM's fairness dialect perturbation (prob 1.0 in its canonical fairness run) with the VALUE
lexicon of Ziems et al. 2022 (https://github.com/GT-SALT/value). The perturbation asks whether
a model's accuracy holds when the same content is phrased in AAVE. It is a lexical lookup, not
a grammar rewrite; the upstream lexicon is used as published (it includes slang and some
offensive substitutions).
"""

from __future__ import annotations

import re
from random import Random

from .base import FAIRNESS, Perturbation, alternation, check_prob, match_case
from .word_lists import WordMap


def dialect(mapping: WordMap, prob: float = 1.0, name: str = "dialect") -> Perturbation:
    """Each SAE word or phrase in `mapping` (case-insensitive), with probability `prob`,
    replaced by one of its AAVE forms chosen uniformly, cased like the original; inputs and
    references alike.

    A word is delimited by anything but a word character or '-', as in HELM, but checked with
    lookarounds: HELM consumes the delimiters, so it misses a word at the very start or end of
    the text and the second of two adjacent words ("to be the" -> HELM "to b the", here
    "to b da")."""
    check_prob(prob)
    pattern = alternation(mapping, left=r"(?<![\w-])", right=r"(?![\w-])", flags=re.IGNORECASE)

    def fn(text: str, rng: Random) -> str:
        def sub(m: re.Match) -> str:
            word = m.group(0)
            if rng.random() < prob:
                return match_case(word, rng.choice(mapping[word.lower()]))
            return word

        return pattern.sub(sub, text)

    return Perturbation(name, fn, FAIRNESS, perturb_references=True)
