"""Loading the large word lists, from pinned files the caller passes in.

These lists are too big (or too unlike code) to live in the repository, so the caller fetches
them as pinned sources and hands their paths here; this module never downloads anything or
looks in a shared directory on its own. Each loader can check the file's sha256 first.

The files, their origins and their sha256 are pinned once, in conf/config.yaml `resources`:
- correct_to_misspelling.json (`misspellings`): the crfm-helm==0.5.16 wheel.
- sae_aave_mapping_dict.pkl (`dialect`): GT-SALT/value at a fixed commit.
- bias_word_lists.py (`bias_word_lists`): the crfm-helm==0.5.16 wheel (Garg et al. last names by
  race, read as data with `ast`, never imported).
"""

from __future__ import annotations

import ast
import io
import json
import pickle
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path

from ..errors import EvaltrailError
from ..hashing import sha256_file

WordMap = Mapping[str, tuple[str, ...]]
"""word -> its replacements, in a fixed order (the rng picks by index)."""


def _check(path: Path, sha256: str | None) -> Path:
    path = Path(path)
    if not path.is_file():
        raise EvaltrailError(f"{path}: no such file (perturbation word list)")
    if sha256 is not None and (got := sha256_file(path)) != sha256:
        raise EvaltrailError(f"{path}: sha256 {got} does not match the pinned {sha256}")
    return path


def _word_map(raw: object, where: str) -> dict[str, tuple[str, ...]]:
    """Validate {str: str | [str] | {str}} and freeze it; sets are sorted so that the rng's
    pick does not depend on PYTHONHASHSEED."""
    if not isinstance(raw, dict):
        raise EvaltrailError(f"{where}: expected a mapping of word -> replacements, got {type(raw).__name__}")
    out: dict[str, tuple[str, ...]] = {}
    for k, v in raw.items():
        if isinstance(v, str):
            v = (v,)
        elif isinstance(v, (set, frozenset)):
            v = tuple(sorted(v))
        elif isinstance(v, list):
            v = tuple(v)
        else:
            raise EvaltrailError(f"{where}: {k!r}: replacements must be str or a list/set of str")
        if not isinstance(k, str) or not v or not all(isinstance(s, str) and s for s in v):
            raise EvaltrailError(f"{where}: {k!r}: keys and replacements must be non-empty strings")
        out[k] = v
    return out


def load_misspellings(path: str | Path, sha256: str | None = None) -> dict[str, tuple[str, ...]]:
    """HELM's correct_to_misspelling.json: {correct word: [common misspellings]}.

    Keys are case-exact ("already" and "Already" are separate entries), some span words."""
    p = _check(path, sha256)
    return _word_map(json.loads(p.read_text(encoding="utf-8")), str(p))


class _DataOnlyUnpickler(pickle.Unpickler):
    """Unpickling runs code named by the stream; this one refuses every global except the
    plain container/str constructors, so a tampered file fails instead of executing."""

    ALLOWED = frozenset({("builtins", "dict"), ("builtins", "str"), ("builtins", "set"), ("builtins", "frozenset")})

    def find_class(self, module: str, name: str):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"global {module}.{name} is not allowed in a word-list pickle")
        return super().find_class(module, name)

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("persistent ids are not allowed in a word-list pickle")


def load_dialect_mapping(path: str | Path, sha256: str | None = None) -> dict[str, tuple[str, ...]]:
    """The SAE -> AAVE lexicon of Ziems et al. 2022 (VALUE): {sae word: aave forms}.

    Reads the upstream pickle (dict of str -> set of str) with a data-only unpickler, or a
    JSON file of the same shape (HELM's converted copy, {str: [str]})."""
    p = _check(path, sha256)
    if p.suffix == ".json":
        raw = json.loads(p.read_text(encoding="utf-8"))
    else:
        try:
            raw = _DataOnlyUnpickler(io.BytesIO(p.read_bytes())).load()
        except (pickle.UnpicklingError, EOFError, ValueError) as e:
            raise EvaltrailError(f"{p}: not a plain word-mapping pickle: {e}") from None
    mapping = _word_map(raw, str(p))
    return {k.lower(): v for k, v in mapping.items()}


@dataclass(frozen=True)
class NameTable:
    """Person names by type (last_name) and demographic category."""

    groups: Mapping[str, Mapping[str, Mapping[str, tuple[str, ...]]]] = field(default_factory=dict)
    """name_type -> category (race) -> value (white, hispanic, ...) -> names, lowercased, in file
    order."""

    def names(self, name_type: str, selected: Mapping[str, str]) -> tuple[str, ...]:
        """Names of `name_type` in every selected category=value (HELM intersects them)."""
        by_cat = self.groups.get(name_type, {})
        lists = []
        for cat, val in selected.items():
            found = by_cat.get(cat.lower(), {}).get(val.lower())
            if not found:
                raise EvaltrailError(
                    f"person names: no {name_type} with {cat}={val}; have "
                    f"{sorted((c, v) for c in by_cat for v in by_cat[c])}"
                )
            lists.append(found)
        return reduce(_intersect, lists)


def _intersect(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    """Names in both, in a's order."""
    keep = set(b)
    return tuple(n for n in a if n in keep)


def _freeze(groups) -> NameTable:
    return NameTable(
        {nt: {c: {v: tuple(ns) for v, ns in vals.items()} for c, vals in cats.items()} for nt, cats in groups.items()}
    )


def load_bias_last_names(path: str | Path, sha256: str | None = None) -> NameTable:
    """Last names by race (asian / hispanic / white; Garg et al. 2018) from crfm-helm's
    helm/benchmark/metrics/bias_word_lists.py, read with `ast` as literals (never executed):
    its RACE_TO_NAME_LISTS names the list variable for each race."""
    p = _check(path, sha256)
    lists: dict[str, list[str]] = {}
    races: dict[str, str] = {}
    for node in ast.parse(p.read_text(encoding="utf-8")).body:
        target = (
            node.target
            if isinstance(node, ast.AnnAssign)
            else (node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        )
        if not isinstance(target, ast.Name) or node.value is None:
            continue
        if target.id == "RACE_TO_NAME_LISTS" and isinstance(node.value, ast.Dict):
            races = {
                ast.literal_eval(k): v.id
                for k, v in zip(node.value.keys, node.value.values, strict=True)
                if isinstance(v, ast.Name)
            }
        elif isinstance(node.value, ast.List):
            lists[target.id] = ast.literal_eval(node.value)
    if not races or any(var not in lists for var in races.values()):
        raise EvaltrailError(f"{p}: no RACE_TO_NAME_LISTS of literal name lists found")
    return _freeze({"last_name": {"race": {race: [n.lower() for n in lists[var]] for race, var in races.items()}}})


@dataclass(frozen=True, eq=False)
class Resources:
    """The loaded word lists perturbations need; hashable by identity so built perturbations
    (with their compiled regexes) can be cached per Resources object."""

    misspellings: WordMap | None = None
    """For misspelling and mild_mix: load_misspellings(correct_to_misspelling.json)."""
    dialect: WordMap | None = None
    """For dialect: load_dialect_mapping(sae_aave_mapping_dict.pkl)."""
    names: NameTable | None = None
    """For person_name_last: load_bias_last_names(bias_word_lists.py)."""

    @classmethod
    def from_files(
        cls,
        misspellings: str | Path | None = None,
        dialect: str | Path | None = None,
        bias_word_lists: str | Path | None = None,
    ) -> Resources:
        """Load whichever files are given (no pin check: use the loaders for that)."""
        names = load_bias_last_names(bias_word_lists) if bias_word_lists else NameTable()
        return cls(
            misspellings=load_misspellings(misspellings) if misspellings else None,
            dialect=load_dialect_mapping(dialect) if dialect else None,
            names=names if names.groups else None,
        )
