"""IMDb sentiment (Maas et al. 2011) on the contrast-set release (Gardner et al. 2020).

allenai/contrast-sets ships 488 test and 100 dev reviews (`<split>_original.tsv`) and, row for
row, a human edit of each that flips its sentiment (`<split>_contrast.tsv`). The eval split is
the 488 test originals plus (option `contrast_set`) their 488 edits, perturbation="contrast_set",
metadata original_id; the dev originals are the pool for in-context examples.
Review text is kept exactly as released, "<br />" line breaks included: HELM feeds the raw
aclImdb text the same way, and originals and edits then differ only by the human edit.
The TSVs are CSV-quoted (fields holding '"' are wrapped in quotes, inner quotes doubled), so
they are read with csv quoting on, not with rows.tsv_rows (which keeps quotes literally).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Iterator

from ..config import ScenarioConfig
from ..errors import EvaltrailError
from ..schema import Instance, Reference, make_instance
from . import contrast, register
from .rows import convert

LABELS = ("Positive", "Negative")


def quoted_tsv_rows(path: Path) -> Iterator[tuple[int, tuple[int, dict]]]:
    """(line number, (row position from 0, row dict)) for a CSV-quoted tab-separated file."""
    if not path.is_file():
        raise EvaltrailError(f"{path}: missing raw file; run `dvc repro` so fetch materializes it")
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f, delimiter="\t")
        for pos, row in enumerate(reader):
            yield reader.line_num, (pos, row)


def _instance(split: str, row: dict) -> Instance:
    if None in row:
        raise ValueError(f"more than the 2 columns Sentiment, Text: {row[None]!r}"[:200])
    text, label = row["Text"].strip(), row["Sentiment"]
    if label not in LABELS or not text:
        raise ValueError(f"Sentiment {label!r} (valid: {', '.join(LABELS)}), Text of {len(text)} characters")
    return make_instance(split, text, [Reference(label, True)])


def _originals(cfg: ScenarioConfig, path: Path, split: str) -> dict[int, Instance]:
    """Row position -> instance (positions pair originals with their contrast rows)."""
    by_pos: dict[int, Instance] = {}

    def make(item):
        pos, row = item
        by_pos[pos] = _instance(split, row)
        return by_pos[pos]

    convert(cfg, path, quoted_tsv_rows(path), make)
    return by_pos


def _contrast(cfg: ScenarioConfig, path: Path, originals: dict[int, Instance]) -> list[Instance]:
    def make(item):
        pos, row = item
        if pos not in originals:
            raise KeyError(f"no original review at row {pos + 1} (missing or malformed)")
        original = originals[pos]
        inst = _instance(cfg.eval_split, row)
        if inst.references[0].text == original.references[0].text:
            raise ValueError("the edit keeps the original's sentiment (files out of step?)")
        return contrast.mark(inst, original)

    made = convert(cfg, path, quoted_tsv_rows(path), make)
    rows = sum(1 for _ in quoted_tsv_rows(path))
    if rows < len(originals):
        raise EvaltrailError(f"{path}: {rows} rows for {len(originals)} originals; the files pair row for row")
    return made


def _select(cfg: ScenarioConfig) -> list[dict]:
    return contrast.sources(cfg, {f"{cfg.eval_split}_contrast.tsv"})


@register("imdb", options=(contrast.OPTION,), select_sources=_select)
def load(cfg: ScenarioConfig, raw: Path) -> dict[str, list]:
    originals = _originals(cfg, raw / f"{cfg.eval_split}_original.tsv", cfg.eval_split)
    out = {cfg.eval_split: list(originals.values())}
    if contrast.enabled(cfg):
        out[cfg.eval_split] += _contrast(cfg, raw / f"{cfg.eval_split}_contrast.tsv", originals)
    if cfg.train_split:
        out[cfg.train_split] = list(_originals(cfg, raw / f"{cfg.train_split}_original.tsv", cfg.train_split).values())
    return out
