"""XSum (Narayan et al. 2018): the one-sentence summary a BBC editor wrote for an article.

Articles run to 17k characters, so the document is cut to at most `max_document_chars`
characters (null: keep it whole), at a word boundary; metadata keeps the original length.
"""

from __future__ import annotations

from pathlib import Path

from ..config import ScenarioConfig
from ..schema import Reference, make_instance
from . import register
from .rows import convert, jsonl_rows
from .text import char_limit, cut_metadata, truncate


@register("xsum", options=("max_document_chars",))
def load(cfg: ScenarioConfig, raw: Path) -> dict[str, list]:
    limit = char_limit(cfg, "max_document_chars")
    path = raw / f"{cfg.eval_split}.jsonl"

    def make(row: dict):
        document, summary = row["document"].strip(), row["summary"].strip()
        if not document or not summary:
            raise ValueError("empty document or summary")
        kept = truncate(document, limit)
        meta = {"id": str(row["id"]), **cut_metadata(document, kept, "document")}
        return make_instance(cfg.eval_split, kept, [Reference(summary, True)], meta)

    return {cfg.eval_split: convert(cfg, path, jsonl_rows(path), make)}
