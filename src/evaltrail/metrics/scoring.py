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
    rows = frame[(frame["method"] == "loglikelihood") & ~frame["calibration"]].copy()
    rows["correct"] = [bool(refs[int(i)]["correct"]) for refs, i in zip(rows["references"], rows["choice_index"])]
    cal = frame[(frame["method"] == "loglikelihood") & frame["calibration"]]
    if len(cal):
        keys = ["instance_id", "trial", "choice_index"]
        base = cal.set_index(keys)["logprob"].rename("_cal")
        rows = rows.join(base, on=keys)
        rows["calibrated_logprob"] = rows["logprob"] - rows["_cal"]
    return metric(rows)


def _values(frame: pd.DataFrame, cfg: ScenarioConfig, metric, adapter) -> pd.Series:
    if metric.kind == "reference":
        if not hasattr(adapter, "golds"):
            raise EvaltrailError(f"params.yaml: scenario.{cfg.name}.metrics: {metric.name} needs generated "
                                 f"text, but method {cfg.method} produces loglikelihoods")
        return _reference_values(frame, metric, adapter.golds)
    if metric.kind == "choice":
        return _choice_values(frame, metric)
    return metric(frame[frame["method"] == "loglikelihood_rolling"])


def score_frame(frame: pd.DataFrame, cfg: ScenarioConfig, adapter) -> pd.DataFrame:
    """Long table of (instance_id, metric, value, perturbation, trial), sorted deterministically."""
    parts = [pd.DataFrame(columns=SCORES_SCHEMA.names)]
    pert = frame.drop_duplicates(["instance_id", "trial"]).set_index(["instance_id", "trial"])["perturbation"]
    for name in cfg.metrics:
        part = _values(frame, cfg, get_metric(name), adapter).rename("value").reset_index()
        part["metric"] = name
        part["perturbation"] = pert.reindex(pd.MultiIndex.from_frame(part[["instance_id", "trial"]])).to_numpy()
        parts.append(part)
    out = pd.concat(parts, ignore_index=True)
    out["trial"] = out["trial"].astype(np.int32)
    out["value"] = out["value"].astype(np.float64)
    return out.sort_values(["metric", "instance_id", "trial"], kind="stable").reset_index(drop=True)[SCORES_SCHEMA.names]


def scores_table(scores: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(scores, schema=SCORES_SCHEMA, preserve_index=False)


def summarize(scores: pd.DataFrame, cfg: ScenarioConfig, samples: int, seed: int) -> dict:
    """Per metric: mean over instances (trials averaged first) with a bootstrap 95% CI, and the
    mean of each few-shot trial with their spread (population std)."""
    metrics = {}
    for name in cfg.metrics:
        rows = scores[scores["metric"] == name]
        per_instance = rows.groupby("instance_id", sort=True)["value"].mean()
        stats = mean_ci(per_instance.to_numpy(), samples, seed)
        per_trial = rows.groupby("trial", sort=True)["value"].mean()
        stats["trial_means"] = [float(v) for v in per_trial]
        stats["trial_std"] = float(per_trial.std(ddof=0)) if len(per_trial) else None
        metrics[name] = stats
    return {"scenario": cfg.name, "main_metric": cfg.main_metric, "metrics": metrics,
            "n_instances": int(scores["instance_id"].nunique()),
            "n_trials": int(scores["trial"].nunique())}
