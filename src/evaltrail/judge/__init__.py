"""Judged evaluation: pairwise battles and RAG metrics over the pipeline's own completions.

Shared here: which requests a judge reads the answers of, those answers, and running a judge model's
requests (any backend, through the request cache) the way infer runs a contestant's.
"""

from __future__ import annotations

import pandas as pd

from ..errors import EvaltrailError


def answered_requests(prompts: pd.DataFrame) -> pd.DataFrame:
    """The original generation request of each instance (trial 0, no perturbation): the answer judged."""
    gen = prompts[(prompts["method"] == "generate") & prompts["perturbation"].isna() & (prompts["trial"] == 0)]
    if gen.empty:
        raise EvaltrailError("no unperturbed generation requests to judge; judging needs a generation scenario")
    if gen["instance_id"].duplicated().any():
        raise EvaltrailError("several generation requests per instance; a judge reads one answer per model")
    return gen


def answers(model: str, completions: pd.DataFrame, request_ids) -> list[str]:
    """`model`'s completion text for each request, in order; a missing one is an error naming it."""
    text = dict(zip(completions["request_id"], completions["text"]))
    missing = [r for r in request_ids if r not in text]
    if missing:
        raise EvaltrailError(f"completions of {model} lack request {missing[0]}; re-run its infer stage")
    return [text[r] or "" for r in request_ids]


def run_judge(run, judge: str, reqs: pd.DataFrame, desc: str):
    """The judge model's completions of `reqs` (served from the request cache where possible), how
    many were computed now, and the judge's identity."""
    from ..backends import model_identity, open_model
    from ..backends.cache import RequestCache
    from ..backends.infer import run_requests
    from ..config import model_config
    from ..io import read_json
    from ..paths import model_dir, model_info_path, request_cache_path

    cfg, info = model_config(run, judge), read_json(model_info_path(judge))
    identity = model_identity(cfg, info)
    outputs, computed = run_requests(
        reqs,
        identity,
        RequestCache(request_cache_path()),
        lambda: open_model(cfg, model_dir(judge), info),
        desc,
    )
    return outputs, computed, identity
