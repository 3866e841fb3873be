"""Named perturbations with HELM's canonical parameters.

A name fixes the parameters: it seeds the rng and marks each variant, so two settings of one
perturbation must not share a name. For other settings call the factory in its module with
a new `name=`. Building compiles big regexes, so built perturbations are cached per
(name, Resources object).

HELM's robustness run is `mild_mix`; its fairness run is `dialect`, `gender_pronouns` and a
white -> Black American first-name swap whose name list HELM downloads at run time and that no
pinnable source holds, so evaltrail's fairness runs use the last-name swap `person_name_last`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from ..errors import EvaltrailError
from . import dialect, gender, names, robustness
from .base import FAIRNESS, ROBUSTNESS, Perturbation
from .word_lists import Resources


@dataclass(frozen=True)
class Entry:
    build: Callable[[Resources], Perturbation]
    """Resources -> the perturbation (it reads only the fields in `needs`)."""
    needs: tuple[str, ...] = ()
    """Resources fields that must be loaded."""
    summary: str = ""
    """One line for listings."""
    kind: str = ROBUSTNESS
    """robustness | fairness: which worst case the variants count towards."""


_HOW = {
    "misspellings": "Resources(misspellings=load_misspellings(<correct_to_misspelling.json>))",
    "dialect": "Resources(dialect=load_dialect_mapping(<sae_aave_mapping_dict.pkl>))",
    "names": "Resources(names=load_bias_last_names(<bias_word_lists.py>))",
}

REGISTRY: dict[str, Entry] = {
    "lowercase": Entry(lambda r: robustness.lowercase(), summary="lowercase everything"),
    "contraction": Entry(lambda r: robustness.contraction(), summary="'I am a' -> 'I'm a'"),
    "expansion": Entry(lambda r: robustness.expansion(), summary="'I'm' -> 'I am'"),
    "extra_space": Entry(lambda r: robustness.extra_space(2), summary="each space -> 2 spaces"),
    "space": Entry(lambda r: robustness.space(3), summary="each run of spaces -> 1..3 spaces"),
    "typos": Entry(lambda r: robustness.typos(0.1), summary="letters -> keyboard neighbours, p=0.1"),
    "misspelling": Entry(
        lambda r: robustness.misspelling(r.misspellings, 0.1), ("misspellings",), "common misspellings, p=0.1 per word"
    ),
    "mild_mix": Entry(
        lambda r: robustness.mild_mix(r.misspellings),
        ("misspellings",),
        "HELM robustness: lowercase+contraction+misspelling 0.1+space 1..3",
    ),
    "dialect": Entry(lambda r: dialect.dialect(r.dialect, 1.0), ("dialect",), "SAE -> AAVE words, p=1", FAIRNESS),
    "gender_pronouns": Entry(
        lambda r: gender.gender("pronouns", "male", "female", 1.0),
        summary="male -> female pronouns, p=1",
        kind=FAIRNESS,
    ),
    "gender_terms": Entry(
        lambda r: gender.gender("terms", "male", "female", 1.0),
        summary="male -> female terms (son -> daughter), p=1",
        kind=FAIRNESS,
    ),
    "person_name_last": Entry(
        lambda r: names.person_name(r.names, {"race": "white"}, {"race": "hispanic"}, "last_name", 1.0),
        ("names",),
        "white -> Hispanic last names, p=1",
        FAIRNESS,
    ),
}


def perturbation_kind(name: str) -> str:
    """robustness or fairness; a variant from the data itself (a contrast set) is robustness."""
    return REGISTRY[name].kind if name in REGISTRY else ROBUSTNESS


def list_perturbations() -> list[str]:
    return sorted(REGISTRY)


def get_perturbation(name: str, resources: Resources | None = None) -> Perturbation:
    """The registered perturbation `name`, built with the word lists it needs."""
    if name not in REGISTRY:
        raise EvaltrailError(f"unknown perturbation {name!r}; valid: {', '.join(list_perturbations())}")
    return _build(name, resources or _EMPTY)


_EMPTY = Resources()


@lru_cache(maxsize=64)
def _build(name: str, resources: Resources) -> Perturbation:
    entry = REGISTRY[name]
    for need in entry.needs:
        if getattr(resources, need) is None:
            raise EvaltrailError(f"perturbation {name!r} needs a word list: pass {_HOW[need]}")
    return entry.build(resources)
