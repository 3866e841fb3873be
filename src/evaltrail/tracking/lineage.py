"""The lineage tags of one (scenario, model) cell, from files on disk and dvc.lock."""

from __future__ import annotations

from ..io import read_json
from ..paths import completions_path, model_dir, model_info_path, prompts_path, scores_path, sources_json
from ..provenance.lock import git_commit, recorded_md5


def cell_tags(lock: dict, scenario: str, model: str, summary: dict, commit: str | None = None) -> dict[str, str]:
    tags = {
        "evaltrail.scenario": scenario,
        "evaltrail.model": model,
        "evaltrail.git_commit": commit or git_commit(),
        "evaltrail.model_sha256": summary.get("model_sha256", ""),
        **{f"evaltrail.scorer.{k}": v for k, v in summary.get("scorers", {}).items()},
        # the llama.cpp build that computed the answers (embedded models): an input like the weights
        **{f"evaltrail.engine.{k}": str(v) for k, v in (summary.get("engine") or {}).items()},
    }
    info = read_json(model_info_path(model)) if model_info_path(model).is_file() else {}
    if info.get("sha256_of"):  # what model_sha256 hashes when not weights: a served model's is the server's word
        tags["evaltrail.model_sha256_of"] = info["sha256_of"]
    for rec in read_json(sources_json(scenario)):
        tags[f"data.sha256.{scenario}/{rec['file']}"] = rec["sha256"]
    # dvc.lock's md5 of every artifact between the raw data and this cell's scores
    for stage, path in (
        (f"prepare@{scenario}", prompts_path(scenario)),
        (f"fetch_model@{model}", model_dir(model)),
        (f"infer@{scenario}-{model}", completions_path(scenario, model)),
        (f"score@{scenario}-{model}", scores_path(scenario, model)),
    ):
        tags[f"dvc.md5.{path.as_posix()}"] = recorded_md5(lock, stage, path) or "unrecorded"
    tags[f"dvc.md5.data/raw/{scenario}"] = (
        recorded_md5(lock, f"fetch@{scenario}", f"data/raw/{scenario}") or "unrecorded"
    )
    return tags
