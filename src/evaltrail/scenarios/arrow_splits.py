"""One Arrow file per split (raw/<split>.arrow): the layout of the single-file scenarios.

Loaders read every split the conf names (eval_split, and train_split when set) through
`rows.convert`, so a malformed row is reported as file:row and skipped only if allowed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ..config import ScenarioConfig
from ..schema import Instance
from .arrow import arrow_rows
from .rows import convert


def load_splits(cfg: ScenarioConfig, raw: Path, make: Callable[[str, dict], Instance]) -> dict[str, list[Instance]]:
    """{split: instances}, `make(split, row)` building one instance from one Arrow row."""
    out: dict[str, list[Instance]] = {}
    for split in dict.fromkeys([cfg.eval_split, cfg.train_split]):
        if split:
            path = raw / f"{split}.arrow"
            out[split] = convert(cfg, path, arrow_rows(path), lambda row, s=split: make(s, row))
    return out
