"""Score a scenario's completions: per-instance metric values and their summary."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa

from ..config import ScenarioConfig
from ..errors import EvaltrailError
from ..perturbations.registry import perturbation_kind
from ..schema import SCORES_SCHEMA, Reference
from .accuracy import choice_rows
from .calibration import MIN_RELIABLE_N, is_reliable, reliability
from .registry import GROUPS, PER_INSTANCE, Context, get_metric, word_lists
from .stats import bootstrap_corpus, mean_ci_analytic
from .worst_case import worst_case


def join(prompts: pd.DataFrame, completions: pd.DataFrame) -> pd.DataFrame:
    """Prompts with their completions; every request must have exactly one completion."""
    if len(completions) != len(prompts) or not completions["request_id"].is_unique:
        raise EvaltrailError(
            "completions do not match prompts one to one; re-run infer (`dvc repro` will, since its inputs changed)"
        )
    merged = prompts.merge(completions, on="request_id", how="left", validate="one_to_one")
    if merged["model_sha256"].isna().any():
        raise EvaltrailError("completions lack some prompt's request_id; re-run infer")
    return merged


def _original_ids(frame: pd.DataFrame) -> pd.Series:
    """Per row: the instance a variant was made from (its own id for an original)."""
    named = [json.loads(m).get("original_id") for m in frame["metadata"]]
    return pd.Series([o or i for o, i in zip(named, frame["instance_id"])], index=frame.index)


def _reference_values(frame: pd.DataFrame, metric, golds_fn) -> pd.Series:
    rows = frame[frame["method"] == "generate"]
    golds = [golds_fn([Reference(r["text"], bool(r["correct"])) for r in refs]) for refs in rows["references"]]
    values = [max((metric(g, str(pred)) for g in gs), default=0.0) for gs, pred in zip(golds, rows["text"].fillna(""))]
    return pd.Series(values, index=pd.MultiIndex.from_frame(rows[["instance_id", "trial"]]), dtype=float)


def _text_values(frame: pd.DataFrame, metric) -> pd.Series:
    rows = frame[frame["method"] == "generate"]
    values = metric([str(t) for t in rows["text"].fillna("")])
    return pd.Series(values, index=pd.MultiIndex.from_frame(rows[["instance_id", "trial"]]), dtype=float)


def _values(frame: pd.DataFrame, cfg: ScenarioConfig, metric, adapter) -> pd.Series:
    if metric.kind == "reference":
        if not hasattr(adapter, "golds"):
            raise EvaltrailError(
                f"params.yaml: scenario.{cfg.name}.metrics: {metric.name} needs generated "
                f"text, but method {cfg.method} produces loglikelihoods"
            )
        return _reference_values(frame, metric, adapter.golds)
    if metric.kind == "text":
        if not (frame["method"] == "generate").any():
            raise EvaltrailError(f"params.yaml: scenario.{cfg.name}.metrics: {metric.name} needs generated text")
        return _text_values(frame, metric)
    if metric.kind == "choice":
        return metric(choice_rows(frame))
    if metric.kind == "usage":
        return metric(frame)
    if metric.kind in ("code", "generated"):
        if not (frame["method"] == "generate").any():
            raise EvaltrailError(f"params.yaml: scenario.{cfg.name}.metrics: {metric.name} needs generated text")
        return metric(frame[frame["method"] == "generate"])
    return metric(frame[frame["method"] == "loglikelihood_rolling"])


def score_frame(frame: pd.DataFrame, cfg: ScenarioConfig, adapter) -> pd.DataFrame:
    """Long table of per-instance values (instance_id, metric, value, perturbation, trial,
    original_id) for every per-instance metric, with the worst-case companions of the accuracy
    metrics when the scenario has variants; sorted deterministically."""
    parts = [pd.DataFrame(columns=SCORES_SCHEMA.names)]
    keys = frame.drop_duplicates(["instance_id", "trial"]).set_index(["instance_id", "trial"])
    keys = keys.assign(original_id=_original_ids(keys.reset_index()).to_numpy())
    for name in cfg.metrics:
        metric = get_metric(name)
        if metric.kind not in PER_INSTANCE:
            continue
        part = _values(frame, cfg, metric, adapter).rename("value").reset_index()
        at = pd.MultiIndex.from_frame(part[["instance_id", "trial"]])
        part["metric"] = name
        part["perturbation"] = keys["perturbation"].reindex(at).to_numpy()
        part["original_id"] = keys["original_id"].reindex(at).to_numpy()
        parts.append(part)
        if metric.family == "accuracy" and metric.higher_is_better is not None:
            parts.append(worst_case(part, name, metric.higher_is_better))
    out = pd.concat(parts, ignore_index=True)
    out["trial"] = out["trial"].astype(np.int32)
    out["value"] = out["value"].astype(np.float64)
    return out.sort_values(["metric", "instance_id", "trial"], kind="stable").reset_index(drop=True)[
        SCORES_SCHEMA.names
    ]


def corpus_inputs(frame: pd.DataFrame, cfg: ScenarioConfig, ctx: Context) -> dict[str, dict]:
    """Per corpus group the scenario uses: its per-instance arrays over the original instances."""
    originals = frame[frame["perturbation"].isna()]
    groups = {metric.fn.name: metric.fn for metric in map(get_metric, cfg.metrics) if metric.kind == "corpus"}
    out: dict[str, dict] = {}
    for name, group in sorted(groups.items()):
        arrays = group.inputs(originals, ctx)
        if arrays is None:
            raise EvaltrailError(
                f"params.yaml: scenario.{cfg.name}.metrics: {', '.join(group.metrics)} "
                f"need {name} inputs that method {cfg.method} does not produce"
            )
        out[name] = arrays
    return out


def scores_table(scores: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(scores, schema=SCORES_SCHEMA, preserve_index=False)


def _info(name: str) -> dict:
    base = name.split("/")[0]
    metric = get_metric(base)
    fam = metric.family
    if "/" in name:  # a worst case counts towards robustness or fairness
        view = name.split("/", 1)[1]
        fam = view if view in ("robustness", "fairness") else perturbation_kind(view)
    return {"family": fam, "higher_is_better": metric.higher_is_better}


def summarize(scores: pd.DataFrame, corpus: dict[str, dict], cfg: ScenarioConfig, samples: int, seed: int) -> dict:
    """Per metric, over the original instances: the mean of per-instance values (trials averaged
    first) with an analytic 95% CI and each few-shot trial's mean with their spread; corpus
    metrics with a seeded bootstrap CI over instances."""
    metrics = {}
    originals = scores[scores["perturbation"].isna()]
    for name, rows in originals.groupby("metric", sort=True):
        stats = mean_ci_analytic(rows.groupby("instance_id", sort=True)["value"].mean().to_numpy())
        per_trial = rows.groupby("trial", sort=True)["value"].mean()
        stats["trial_means"] = [float(v) for v in per_trial]
        stats["trial_std"] = float(per_trial.std(ddof=0)) if len(per_trial) else None
        metrics[name] = {**stats, **_info(name)}
    for i, (group, arrays) in enumerate(sorted(corpus.items())):
        for name, stats in bootstrap_corpus(GROUPS[group].compute, arrays, samples, seed + i).items():
            if name in cfg.metrics:
                metrics[name] = {**stats, **_info(name)}
                if metrics[name]["family"] == "calibration" and not is_reliable(stats["n"]):
                    metrics[name]["warning"] = f"n={stats['n']} < {MIN_RELIABLE_N}: binned calibration is unreliable"
    out = {
        "scenario": cfg.name,
        "main_metric": cfg.main_metric,
        "metrics": metrics,
        "n_instances": int(originals["instance_id"].nunique()),
        "n_variants": int(scores.loc[scores["perturbation"].notna(), "instance_id"].nunique()),
        "n_trials": int(scores["trial"].nunique()),
    }
    if "calibration" in corpus:
        arrays = corpus["calibration"]
        out["reliability"] = reliability(arrays["prob"].ravel(), arrays["correct"].ravel())
    return out


def group_means(scores: pd.DataFrame, frame: pd.DataFrame, cfg: ScenarioConfig) -> dict:
    """Per value of the scenario's sample_group (MMLU's subject, XSTest's prompt type): n and mean
    of each per-instance accuracy or safety metric over the original instances; {} when the
    scenario has no groups."""
    if not cfg.sample_group:
        return {}
    meta = frame.drop_duplicates("instance_id").set_index("instance_id")["metadata"]
    group = meta.map(lambda m: str(json.loads(m).get(cfg.sample_group, "")))
    rows = scores[
        scores["perturbation"].isna()
        & scores["metric"].isin(
            [
                m
                for m in cfg.metrics
                if get_metric(m).kind in PER_INSTANCE and get_metric(m).family in ("accuracy", "safety")
            ]
        )
    ]
    per = rows.groupby(["metric", "instance_id"])["value"].mean().reset_index()
    per["group"] = per["instance_id"].map(group)
    return {
        g: {m: {"n": int(len(v)), "mean": float(v["value"].mean())} for m, v in part.groupby("metric")}
        for g, part in per.groupby("group")
    }


def scorers(cfg: ScenarioConfig) -> dict[str, str]:
    """Versions of the models that score text (part of a number's provenance)."""
    from .. import sandbox
    from .toxicity import CLASSIFIER_PACKAGE, classifier_version

    out = {}
    if any(get_metric(m).family == "toxicity" for m in cfg.metrics):
        out["toxicity"] = f"{CLASSIFIER_PACKAGE}=={classifier_version()}"
    if any(get_metric(m).kind == "code" for m in cfg.metrics):
        out["code"] = f"evaltrail.sandbox (bubblewrap) with {sandbox.interpreter_version()}"
    return out


def score_cell(run, scenario: str, model: str) -> tuple[pd.DataFrame, dict]:
    """One cell's per-instance scores and summary from its stored prompts and completions: what
    the score stage writes, and what `trace` recomputes to prove the stored numbers."""
    from .. import resources
    from ..adapters import get_adapter
    from ..io import computed_by
    from ..paths import completions_path, prompts_path, raw_dir

    cfg = run.scenario[scenario]
    frame = join(pd.read_parquet(prompts_path(scenario)), pd.read_parquet(completions_path(scenario, model)))
    lists = "bias_word_lists" in word_lists(cfg.metrics)
    ctx = Context(word_lists=resources.path(run.resources, raw_dir(scenario), "bias_word_lists") if lists else None)
    scores = score_frame(frame, cfg, get_adapter(cfg.method))
    summary = summarize(scores, corpus_inputs(frame, cfg, ctx), cfg, run.bootstrap_samples, run.seed)
    summary.update(
        model=model,
        model_sha256=frame["model_sha256"].iloc[0],
        scorers=scorers(cfg),
        groups=group_means(scores, frame, cfg),
        engine=computed_by(completions_path(scenario, model)),
    )
    if any(get_metric(m).kind == "code" for m in cfg.metrics):
        summary["code_outcomes"] = code_reasons(frame)
    if any(get_metric(m).family == "safety" for m in cfg.metrics):
        from .refusal import classifier_checks

        summary["classifier_checks"] = classifier_checks(raw_dir(scenario), run.bootstrap_samples, run.seed)
    return scores, summary


def code_reasons(frame: pd.DataFrame) -> dict[str, int]:
    """How the original instances' programs ended in the sandbox: reason -> count, most common first."""
    from .accuracy import code_outcomes

    rows = frame[(frame["method"] == "generate") & frame["perturbation"].isna()]
    counts = code_outcomes(rows)["reason"].value_counts()
    return {str(k): int(v) for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))}
