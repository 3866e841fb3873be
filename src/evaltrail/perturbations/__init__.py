"""Robustness and fairness perturbations with HELM's semantics (crfm-helm 0.5.16).

A Perturbation is (name, fn(text, rng) -> text). `get_perturbation(name, resources)` builds a
registered one with HELM's canonical parameters; `perturb_instance` applies it to an Instance
with an rng seeded from the instance id and the name, giving a new Instance whose id hashes
its perturbed content and whose metadata names the original. Large word lists (misspellings,
the SAE->AAVE lexicon, last names) come from pinned files the caller loads into Resources;
small ones ship in data/ with their sources.
"""

from .base import FAIRNESS, ROBUSTNESS, Perturbation, TextFn, match_case
from .instance import perturb_all, perturb_instance, rng_for, variant_id
from .registry import get_perturbation, list_perturbations
from .word_lists import (
    NameTable,
    Resources,
    load_bias_last_names,
    load_dialect_mapping,
    load_misspellings,
)

__all__ = [
    "FAIRNESS",
    "ROBUSTNESS",
    "NameTable",
    "Perturbation",
    "Resources",
    "TextFn",
    "get_perturbation",
    "list_perturbations",
    "load_bias_last_names",
    "load_dialect_mapping",
    "load_misspellings",
    "match_case",
    "perturb_all",
    "perturb_instance",
    "rng_for",
    "variant_id",
]
