"""Person names: swap names typical of one demographic group for names of another.

HELM's fairness run maps white-American first names to Black-American ones (prob 1.0,
gender preserved); its last-name runs map white -> Hispanic surnames. A name once swapped stays
swapped everywhere in the instance, references included, so the answer still names the same
person.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from random import Random

from .base import FAIRNESS, Perturbation, TextFn, check_prob, match_case
from .resources import NameTable

_SPLIT = re.compile(r"(\W)")


def person_name(
    table: NameTable,
    source: Mapping[str, str],
    target: Mapping[str, str],
    name_type: str = "first_name",
    preserve_gender: bool = True,
    prob: float = 1.0,
    name: str = "person_name",
) -> Perturbation:
    """Each `source`-group name (a whole token, case-insensitive) replaced with probability
    `prob` by a `target`-group name drawn uniformly, cased like the original.

    The decision is made once per distinct name per instance: swapped names keep their
    substitute, declined ones stay as they are, across the input and all references. With
    `preserve_gender`, the substitute has the same gender as the name when the table knows it
    (and the name is left alone if the target group has no name of that gender); names of
    unknown gender get any target name, as in HELM."""
    check_prob(prob)
    if preserve_gender and name_type != "first_name":
        raise ValueError("preserve_gender needs first names (last names carry no gender)")
    sources = frozenset(table.names(name_type, source))
    targets = table.names(name_type, target)
    by_gender = {g: tuple(n for n in targets if table.gender(name_type, n) == g) for g in ("female", "male", "neutral")}

    def options(token: str) -> tuple[str, ...]:
        g = table.gender(name_type, token) if preserve_gender else None
        return by_gender[g] if g else targets

    def session() -> TextFn:
        chosen: dict[str, str] = {}
        kept: set[str] = set()

        def fn(text: str, rng: Random) -> str:
            out = []
            for token in _SPLIT.split(text):
                low = token.lower()
                if low in sources and low not in chosen and low not in kept:
                    if rng.random() < prob:
                        if opts := options(low):
                            chosen[low] = rng.choice(opts)
                        else:
                            kept.add(low)  # no target name of its gender
                    else:
                        kept.add(low)
                out.append(match_case(token, chosen[low]) if low in chosen else token)
            return "".join(out)

        return fn

    return Perturbation(
        name, lambda text, rng: session()(text, rng), FAIRNESS, perturb_references=True, per_instance=session
    )
