"""Sentence embeddings from a pinned sentence-transformers directory, without sentence-transformers.

all-MiniLM-L6-v2 is a BERT encoder followed by mean pooling over the attention mask and L2
normalization (its modules.json); the same three steps here, with transformers loading only the
files fetch verified (HF_HUB_OFFLINE=1, local_files_only). Needs the `rag` extra (torch, transformers).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from ..errors import EvaltrailError

MAX_SEQ_LENGTH = 256  # the model's sentence_bert_config.json: longer inputs are cut


def load_embedder(path: Path, batch: int = 32):
    """embed(texts) -> float32 array (len(texts), dim), unit rows, deterministic on CPU."""
    os.environ["HF_HUB_OFFLINE"] = "1"  # never reach for a hub: everything is in `path`, pinned
    try:
        import torch
        from transformers import AutoModel, AutoTokenizer
    except ImportError:
        raise EvaltrailError("RAG answer relevancy needs torch and transformers: pip install -e '.[rag]'") from None
    pooling = json.loads((path / "pooling.json").read_text()) if (path / "pooling.json").is_file() else {}
    if not pooling.get("pooling_mode_mean_tokens", False):
        raise EvaltrailError(f"{path}/pooling.json: expected mean pooling (a sentence-transformers MiniLM model)")
    tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    model = AutoModel.from_pretrained(str(path), local_files_only=True).eval()

    def embed(texts: list[str]) -> np.ndarray:
        out = []
        with torch.no_grad():
            for i in range(0, len(texts), batch):
                enc = tok(
                    texts[i : i + batch], padding=True, truncation=True, max_length=MAX_SEQ_LENGTH, return_tensors="pt"
                )
                hidden = model(**enc).last_hidden_state
                mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                out.append(torch.nn.functional.normalize(mean, p=2, dim=1).numpy())
        return np.concatenate(out) if out else np.zeros((0, 0), dtype=np.float32)

    return embed
