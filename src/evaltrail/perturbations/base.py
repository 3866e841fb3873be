"""The Perturbation type and the few text helpers every perturbation shares.

A perturbation is a pure function of (text, rng): all randomness comes from the rng it is
handed, so one seed reproduces one variant, and nothing is read from disk or the network
while perturbing (word lists are loaded once, up front, from files the caller pins).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import resources as _pkg
from random import Random

TextFn = Callable[[str, Random], str]
"""(text, rng) -> perturbed text."""

ROBUSTNESS = "robustness"
FAIRNESS = "fairness"


@dataclass(frozen=True)
class Perturbation:
    name: str
    """Registry key; also seeds the rng and marks the variant (Instance.perturbation)."""
    fn: TextFn
    """Perturbs one text; every random choice comes from the rng argument."""
    kind: str = ROBUSTNESS
    """robustness (the model should not care) or fairness (a group's wording should not matter)."""
    perturb_references: bool = False
    """Also rewrite the references: HELM does for fairness (a renamed person stays renamed in the
    answer), never for robustness (it is not fair to demand a misspelled answer)."""
    per_instance: Callable[[], TextFn] | None = None
    """When set, a factory of fresh fns whose state spans one instance's input and references
    (the name swap keeps 'Peter' -> 'Tyree' consistent); `fn` then uses a fresh one per call."""

    def for_instance(self) -> TextFn:
        """The fn to use for all texts of one instance."""
        return self.per_instance() if self.per_instance else self.fn


def match_case(source: str, target: str) -> str:
    """`target` cased like `source`: all lower, ALL CAPS, or Capitalised.

    Only letters decide (HELM counts spaces and apostrophes, so "SHE IS" read as not all-caps),
    and a single capital letter ("I", "A") means Capitalised, not ALL CAPS."""
    letters = [c for c in source if c.isalpha()]
    if not letters:
        return target
    if all(c.islower() for c in letters):
        return target.lower()
    if len(letters) > 1 and all(c.isupper() for c in letters):
        return target.upper()
    if letters[0].isupper():
        return target[:1].upper() + target[1:]
    return target


def alternation(words: Iterable[str], left: str = r"(?<!\w)", right: str = r"(?!\w)", flags: int = 0) -> re.Pattern:
    """One regex matching any of `words` as a whole word, the longest word winning.

    Longest first, so "can't've" is one match rather than "can't" + "'ve", and multi-word
    keys ("a lot") beat their first word. `left`/`right` are the lookarounds that define a
    word boundary; lookarounds (not consumed characters, as in HELM's dialect and gender
    regexes) let words at the very start/end of the text and adjacent words both match."""
    trie: dict = {}
    for w in set(words):
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}  # a word ends here
    if not trie:
        return re.compile(r"(?!)")  # matches nothing
    return re.compile(f"{left}{_trie_pattern(trie)}{right}", flags)


def _trie_pattern(node: dict) -> str:
    """A regex for the words of a character trie, longer words tried first: the branches share
    prefixes, so thousands of keys cost a few steps per position instead of one per key (a
    plain alternation made the 6.5k-word misspelling list ~50x slower)."""
    ends = "" in node
    branches = [re.escape(ch) + _trie_pattern(child) for ch, child in sorted(node.items()) if ch]
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    if ends:  # optional continuation, greedy: the longer word wins, backtracking to this one
        return f"(?:{body})?" if len(branches) > 1 or len(body) > 1 else f"{body}?"
    return body


def load_data(name: str) -> dict:
    """A JSON word list shipped in perturbations/data/ (each names its source)."""
    return json.loads(_pkg.files(__package__).joinpath("data", name).read_text(encoding="utf-8"))


def check_prob(prob: float) -> None:
    if not 0.0 <= prob <= 1.0:
        raise ValueError(f"prob must be in [0, 1], got {prob}")


def compose(*fns: TextFn) -> TextFn:
    """Apply fns in order, all drawing from the same rng."""

    def run(text: str, rng: Random) -> str:
        for fn in fns:
            text = fn(text, rng)
        return text

    return run
