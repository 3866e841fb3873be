"""Score a scenario's completions: per-instance metric values and their summary."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from ..config import ScenarioConfig
from ..errors import EvaltrailError
from ..schema import SCORES_SCHEMA, Reference
from . import get_metric
from .stats import mean_ci


def join(prompts: pd.DataFrame, completions: pd.DataFrame) -> pd.DataFrame:
    """Prompts with their completions; every request must have exactly one completion."""
    if len(completions) != len(prompts) or not completions["request_id"].is_unique:
        raise EvaltrailError("completions do not match prompts one to one; re-run infer "
                             "(`dvc repro` will, since its inputs changed)")
    merged = prompts.merge(completions, on="request_id", how="left", validate="one_to_one")
    if merged["model_sha256"].isna().any():
        raise EvaltrailError("completions lack some prompt's request_id; re-run infer")
    return merged


def _reference_values(frame: pd.DataFrame, metric, golds_fn) -> pd.Series:
    rows = frame[frame["method"] == "generate"]
    golds = [golds_fn([Reference(r["text"], bool(r["correct"])) for r in refs])
             for refs in rows["references"]]
    values = [max((metric(g, str(pred)) for g in gs), default=0.0)
              for gs, pred in zip(golds, rows["text"].fillna(""))]
    return pd.Series(values, index=pd.MultiIndex.from_frame(rows[["instance_id", "trial"]]), dtype=float)


def _choice_values(frame: pd.DataFrame, metric) -> pd.Series:
    rows = frame[frame["method"] == "loglikelihood"].copy()
    rows["correct"] = [bool(refs[int(i)]["correct"]) for refs, i in zip(rows["references"], rows["choice_index"])]
    return metric(rows)


def score_frame(frame: pd.DataFrame, cfg: ScenarioConfig, adapter) -> pd.DataFrame:
    """Long table of (instance_id, metric, value, perturbation, trial), sorted deterministically."""
    parts = []
    pert = frame.drop_duplicates(["instance_id", "trial"]).set_index(["instance_id", "trial"])["perturbation"]
    for name in cfg.metrics:
        metric = get_metric(name)
        if metric.kind == "reference":
            if not hasattr(adapter, "golds"):
                raise EvaltrailError(f"params.yaml: scenario.{cfg.name}.metrics: {name} needs generated "
                                     f"text, but method {cfg.method} produces loglikelihoods")
            values = _reference_values(frame, metric, adapter.golds)
        else:
            values = _choice_values(frame, metric)
        part = values.rename("value").reset_index()
        part["metric"] = name
        part["perturbation"] = pert.reindex(pd.MultiIndex.from_frame(part[["instance_id", "trial"]])).to_numpy()
        parts.append(part)
    out = pd.concat(parts, ignore_index=True)
    out["trial"] = out["trial"].astype(np.int32)
    return out.sort_values(["metric", "instance_id", "trial"], kind="stable").reset_index(drop=True)[SCORES_SCHEMA.names]


def scores_table(scores: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(scores, schema=SCORES_SCHEMA, preserve_index=False)


def summarize(scores: pd.DataFrame, cfg: ScenarioConfig, samples: int, seed: int) -> dict:
    """Per metric: mean over instances (trials averaged first) with a bootstrap 95% CI."""
    metrics = {}
    for name in cfg.metrics:
        per_instance = scores[scores["metric"] == name].groupby("instance_id", sort=True)["value"].mean()
        metrics[name] = mean_ci(per_instance.to_numpy(), samples, seed)
    return {"scenario": cfg.name, "main_metric": cfg.main_metric, "metrics": metrics,
            "n_instances": int(scores["instance_id"].nunique()),
            "n_trials": int(scores["trial"].nunique())}
