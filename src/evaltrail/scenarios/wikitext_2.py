"""WikiText-2 (Merity et al. 2017): language modelling over whole Wikipedia articles.

The file is one stream of articles; an article starts at a top-level heading line
" = Title = " (one '=' each side; " = = Section = = " is a subsection). Each article is one
instance: its lines verbatim, heading included, up to the next top-level heading, so the
articles concatenate back to the file (minus its opening blank line). The text stays as the
pytorch/examples copy has it: tokenized (" @-@ ", " , ") with rare words as <unk>; no
detokenization, so bits per byte are over exactly these bytes.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

from ..config import ScenarioConfig
from ..schema import make_instance
from . import register
from .rows import _require, convert

HEADING = re.compile(r" = ([^=](?:.*[^=])?) = ")


def articles(path: Path) -> Iterator[tuple[int, tuple[str, str]]]:
    """(heading line number, (title, article text)) for each top-level article."""
    start, title, lines = 0, None, []
    with open(_require(path), encoding="utf-8", newline="") as f:
        for no, line in enumerate(f, 1):
            m = HEADING.fullmatch(line.rstrip("\r\n"))
            if m:
                if title is not None:
                    yield start, (title, "".join(lines))
                start, title, lines = no, m.group(1), []
            if title is not None:
                lines.append(line)
    if title is not None:
        yield start, (title, "".join(lines))


@register("wikitext_2")
def load(cfg: ScenarioConfig, raw: Path) -> dict[str, list]:
    path = raw / f"{cfg.eval_split}.txt"

    def make(article: tuple[str, str]):
        title, text = article
        return make_instance(cfg.eval_split, text, [], {"title": title})

    return {cfg.eval_split: convert(cfg, path, articles(path), make)}
