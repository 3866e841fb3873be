"""Robustness perturbations: meaning-preserving rewrites a good model should shrug off.

Semantics follow HELM (crfm-helm 0.5.16, helm/benchmark/augmentations/); where this code
differs it says so. None of them touches the references (HELM: it is not fair to require a
model to produce broken text).
"""

from __future__ import annotations

import re
from random import Random

from .base import ROBUSTNESS, Perturbation, TextFn, alternation, check_prob, compose, load_data, match_case
from .word_lists import WordMap


def lowercase(name: str = "lowercase") -> Perturbation:
    """Every character lowercased (str.lower, so Unicode case rules apply)."""
    return Perturbation(name, lambda text, rng: text.lower(), ROBUSTNESS)


def _contractions() -> dict[str, str]:
    return load_data("contractions.json")["contractions"]


def expansion(name: str = "expansion") -> Perturbation:
    """Each contraction spelled out ("She's" -> "She is"), case kept.

    Matches typographic apostrophes too ("don’t" -> "do not"), which HELM does not; double
    contractions ("can't've") expand whole rather than HELM's "cannot've"."""
    table = {k.replace("'", "\u2019"): v for k, v in _contractions().items()}
    table.update(_contractions())
    pattern = alternation(table, left=r"(?<![\w'’])", right=r"(?![\w'’])", flags=re.IGNORECASE)

    def lookup(word: str) -> str:
        plain = word.replace("\u2019", "'")
        return table.get(plain) or table[plain.lower()]

    def fn(text: str, rng: Random) -> str:
        return pattern.sub(lambda m: match_case(m.group(0), lookup(m.group(0))), text)

    return Perturbation(name, fn, ROBUSTNESS)


def contraction(name: str = "contraction") -> Perturbation:
    """Each expandable phrase contracted ("I am a" -> "I'm a"), as HELM does:

    - only when a space follows, so a sentence end stays formal ("Yes, it is." is kept);
    - when several contractions spell out the same ("ain't", "isn't" -> "is not"), the one
      listed last wins ("isn't"), and double contractions ("can't've") are never produced,
      so "cannot have" becomes "can't have"."""
    reverse: dict[str, str] = {}
    for short, full in _contractions().items():
        if short.count("'") == 1:
            reverse[full] = short
    pattern = alternation(reverse, left=r"(?<!\w)", right=r"(?= )", flags=re.IGNORECASE)

    def fn(text: str, rng: Random) -> str:
        def sub(m: re.Match) -> str:
            phrase = m.group(0)
            return match_case(phrase, reverse.get(phrase) or reverse[phrase.lower()])

        return pattern.sub(sub, text)

    return Perturbation(name, fn, ROBUSTNESS)


def extra_space(num_spaces: int = 2, name: str = "extra_space") -> Perturbation:
    """Every space becomes `num_spaces` spaces (HELM's extra_space2 uses 2). Deterministic."""
    if num_spaces < 0:
        raise ValueError("num_spaces must be >= 0")
    return Perturbation(name, lambda text, rng: text.replace(" ", " " * num_spaces), ROBUSTNESS)


def _space_fn(max_spaces: int) -> TextFn:
    def fn(text: str, rng: Random) -> str:
        return re.sub(r" +", lambda m: " " * rng.randint(1, max_spaces), text)

    return fn


def space(max_spaces: int = 3, name: str = "space") -> Perturbation:
    """Each run of spaces becomes 1..max_spaces spaces, drawn uniformly per run (HELM's
    SpacePerturbation; its docstring says 0.., its code and this draw 1..)."""
    if max_spaces < 1:
        raise ValueError("max_spaces must be >= 1")
    return Perturbation(name, _space_fn(max_spaces), ROBUSTNESS)


def _typo_fn(prob: float) -> TextFn:
    neighbours = {k: tuple(v) for k, v in load_data("keyboard.json")["neighbours"].items()}

    def fn(text: str, rng: Random) -> str:
        out = []
        for ch in text:
            low = ch.lower() if ch.isascii() else ch
            near = neighbours.get(low)
            if near is not None and rng.random() < prob:
                new = rng.choice(near)
                ch = new.upper() if ch.isupper() else new
            out.append(ch)
        return "".join(out)

    return fn


def typos(prob: float = 0.1, name: str = "typos") -> Perturbation:
    """Each ASCII letter, with probability `prob`, replaced by a QWERTY neighbour one key away
    (never itself), case kept: HELM's TyposPerturbation (NL-Augmenter's butter fingers).

    HELM's presets: typo_easy 0.1 (the default here), typo_medium 0.3, typo_hard 0.5;
    robustness_all uses 0.01. Non-ASCII characters are left exactly as they are (HELM
    lower/upper-cases them, which can change e.g. titlecase digraphs)."""
    check_prob(prob)
    return Perturbation(name, _typo_fn(prob), ROBUSTNESS)


def _misspelling_fn(mapping: WordMap, prob: float) -> TextFn:
    pattern = alternation(mapping)

    def fn(text: str, rng: Random) -> str:
        def sub(m: re.Match) -> str:
            word = m.group(0)
            return rng.choice(mapping[word]) if rng.random() < prob else word

        return pattern.sub(sub, text)

    return fn


def misspelling(mapping: WordMap, prob: float = 0.1, name: str = "misspelling") -> Perturbation:
    """Each word that has a common misspelling (Wikipedia's list, as HELM ships it) replaced,
    with probability `prob`, by one of its misspellings chosen uniformly.

    The list is case-exact ("Already" has its own entry), so matching is case-sensitive as in
    HELM. Some keys span words ("a lot"); the longest key at a position wins (HELM takes the
    first in file order, so e.g. its "about" shadows "about a"). HELM's presets: 0.05, 0.20,
    0.5; 0.1 in mild_mix and robustness_all (the default here)."""
    check_prob(prob)
    return Perturbation(name, _misspelling_fn(mapping, prob), ROBUSTNESS)


MILD_MIX_MISSPELLING_PROB = 0.1
MILD_MIX_MAX_SPACES = 3


def mild_mix(mapping: WordMap, name: str = "mild_mix") -> Perturbation:
    """HELM's canonical robustness perturbation (data_augmentation=robustness, the only one in
    ROBUSTNESS_PERTURBATION_SPECS), applied to the input only, in this order:

    1. lowercase (every character);
    2. contraction (expansions contracted when a space follows, prob 1);
    3. misspelling with prob 0.1 per listed word;
    4. space: each run of spaces -> 1..3 spaces (uniform).

    One rng feeds steps 3 and 4. HELM keeps the variant only if its input changed."""
    return Perturbation(
        name,
        compose(
            lowercase().fn,
            contraction().fn,
            _misspelling_fn(mapping, MILD_MIX_MISSPELLING_PROB),
            _space_fn(MILD_MIX_MAX_SPACES),
        ),
        ROBUSTNESS,
    )
