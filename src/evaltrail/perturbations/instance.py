"""Applying a perturbation to an Instance: seeded, reproducible, traceable to its original.

The rng is seeded from sha256(instance_id + perturbation name): the same instance always gets
the same variant, in any process and any order, and different instances get independent
draws. (instance ids are fixed-length hashes, so the concatenation is unambiguous.) HELM
seeds Random(instance.id) for every perturbation alike; adding the name keeps, e.g., the
typos of one instance independent of its misspellings.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable
from random import Random

from ..hashing import stable_id
from ..schema import Instance, Reference
from .base import Perturbation
from .registry import get_perturbation
from .word_lists import Resources


def rng_for(instance_id: str, perturbation: str) -> Random:
    digest = hashlib.sha256((instance_id + perturbation).encode("utf-8")).digest()
    return Random(int.from_bytes(digest, "big"))


def variant_id(input: str, references: Iterable[Reference], perturbation: str) -> str:
    """Content hash of the perturbed instance plus the perturbation name: stable, and never the
    original's id even when nothing changed (make_instance hashes without a name)."""
    return stable_id(
        {"input": input, "references": [[r.text, r.correct] for r in references], "perturbation": perturbation}
    )


def perturb_instance(inst: Instance, perturbation: str | Perturbation, resources: Resources | None = None) -> Instance:
    """A new Instance: `inst` with its input (and, for fairness perturbations, its reference
    texts) perturbed, `perturbation` set to the name and metadata["original_id"] to inst's id.

    The input draws from the rng first, then the references in order. Raises ValueError on an
    instance that is already a variant (its original_id would point at another variant)."""
    p = perturbation if isinstance(perturbation, Perturbation) else get_perturbation(perturbation, resources)
    if inst.perturbation is not None:
        raise ValueError(
            f"instance {inst.instance_id} is already a {inst.perturbation!r} variant; perturb the original"
        )
    rng = rng_for(inst.instance_id, p.name)
    fn = p.for_instance()
    text = fn(inst.input, rng)
    refs = (
        tuple(Reference(fn(r.text, rng), r.correct) for r in inst.references)
        if p.perturb_references
        else inst.references
    )
    return dataclasses.replace(
        inst,
        instance_id=variant_id(text, refs, p.name),
        input=text,
        references=refs,
        perturbation=p.name,
        metadata={**inst.metadata, "original_id": inst.instance_id},
    )


def perturb_all(
    instances: Iterable[Instance],
    perturbation: str | Perturbation,
    resources: Resources | None = None,
    skip_unchanged: bool = True,
) -> list[Instance]:
    """Variants of the original instances (already-perturbed ones are passed over), as HELM's
    eval augmentation makes them: with `skip_unchanged`, a variant whose input equals its
    original's is dropped (HELM compares the input only, even when references changed)."""
    p = perturbation if isinstance(perturbation, Perturbation) else get_perturbation(perturbation, resources)
    out = []
    for inst in instances:
        if inst.perturbation is not None:
            continue
        v = perturb_instance(inst, p)
        if not (skip_unchanged and v.input == inst.input):
            out.append(v)
    return out
