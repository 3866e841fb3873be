"""Gender: swap gendered pronouns or terms from one gender to another.

HELM's fairness run swaps male -> female pronouns with prob 1.0 (gender_pronouns here); the
term swap (son -> daughter, dad -> mom, ...) is its gender_terms_* family. Word lists:
data/gender.json (HELM's, with its sources).
"""

from __future__ import annotations

import re
from random import Random

from .base import FAIRNESS, Perturbation, alternation, check_prob, load_data, match_case

MODES = ("pronouns", "terms")


def _pairs(mode: str, source: str, target: str, bidirectional: bool) -> dict[str, str]:
    data = load_data("gender.json")
    genders = data["genders"]
    if mode not in MODES:
        raise ValueError(f"gender mode must be one of {MODES}, got {mode!r}")
    if source not in genders or target not in genders:
        raise ValueError(f"genders must be among {genders}, got {source!r} -> {target!r}")
    s, t = genders.index(source), genders.index(target)
    pairs: dict[str, str] = {}
    for row in data[mode]:
        pairs.setdefault(row[s], row[t])
    if bidirectional:
        for row in data[mode]:
            pairs.setdefault(row[t], row[s])
    return pairs


def gender(
    mode: str = "pronouns",
    source: str = "male",
    target: str = "female",
    prob: float = 1.0,
    bidirectional: bool = False,
    name: str | None = None,
) -> Perturbation:
    """Each `source`-gender word of `mode`, with probability `prob`, replaced by its
    `target`-gender counterpart, cased like the original; inputs and references alike.

    Ambiguous words keep their first listed counterpart, as in HELM (his -> her, never hers; no
    POS tagging). One pass over the text, so a bidirectional swap (he <-> she) does not undo
    itself as HELM's word-by-word passes do, and words at the text's edges or next to each
    other are replaced too (HELM's own tests mark missing those as bugs)."""
    check_prob(prob)
    pairs = _pairs(mode, source, target, bidirectional)
    pattern = alternation(pairs, flags=re.IGNORECASE)

    def fn(text: str, rng: Random) -> str:
        def sub(m: re.Match) -> str:
            word = m.group(0)
            return match_case(word, pairs[word.lower()]) if rng.random() < prob else word

        return pattern.sub(sub, text)

    return Perturbation(name or f"gender_{mode}", fn, FAIRNESS, perturb_references=True)
