"""Person names: swap names typical of one demographic group for names of another.

HELM's last-name runs map white -> Hispanic surnames (its first-name run needs a list that no
pinnable source holds). A name once swapped stays swapped everywhere in the instance, references
included, so the answer still names the same person.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from random import Random

from .base import FAIRNESS, Perturbation, TextFn, check_prob, match_case
from .word_lists import NameTable

_SPLIT = re.compile(r"(\W)")


def person_name(
    table: NameTable,
    source: Mapping[str, str],
    target: Mapping[str, str],
    name_type: str = "last_name",
    prob: float = 1.0,
    name: str = "person_name_last",
) -> Perturbation:
    """Each `source`-group name (a whole token, case-insensitive) replaced with probability
    `prob` by a `target`-group name drawn uniformly, cased like the original.

    The decision is made once per distinct name per instance: swapped names keep their
    substitute, declined ones stay as they are, across the input and all references."""
    check_prob(prob)
    sources = frozenset(table.names(name_type, source))
    targets = table.names(name_type, target)

    def session() -> TextFn:
        chosen: dict[str, str] = {}
        kept: set[str] = set()

        def fn(text: str, rng: Random) -> str:
            out = []
            for token in _SPLIT.split(text):
                low = token.lower()
                if low in sources and low not in chosen and low not in kept:
                    if rng.random() < prob and targets:
                        chosen[low] = rng.choice(targets)
                    else:
                        kept.add(low)
                out.append(match_case(token, chosen[low]) if low in chosen else token)
            return "".join(out)

        return fn

    return Perturbation(
        name, lambda text, rng: session()(text, rng), FAIRNESS, perturb_references=True, per_instance=session
    )
