"""Per-scenario drill-down data: every instance's prompt, references, each model's output and scores.

The payload is what `data/<scenario>.js` carries to the browser. It stays compact: the few-shot
context that many prompts share is stored once (`contexts`), scores are arrays aligned with
`score_metrics`, and floats are rounded to 4 decimals.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from ..adapters.multiple_choice_joint import parse_letter
from ..config import RunConfig, ScenarioConfig
from ..metrics import get_metric
from ..metrics.accuracy import choice_rows, choice_rule, picks
from ..paths import completions_path, prompts_path, scores_path, sources_json
from .inputs import read_json_input, read_parquet_input

MIN_CONTEXT = 200
"""A shared prompt prefix shorter than this is left inline: storing it apart saves nothing."""


@dataclass
class Output:
    """One model's answer to one instance (one trial)."""

    scores: list[float | None]
    """Per-instance metric values, aligned with the scenario's `score_metrics`."""
    text: str | None = None
    """Generated text (generate request)."""
    logprobs: list[float | None] | None = None
    """Per option, in choice order: logprob of its continuation (separate multiple choice) or of
    its letter after the prompt (joint multiple choice's probes; originals only)."""
    calibration_logprobs: list[float | None] | None = None
    """Calibrated separate multiple choice: each option's logprob after the bare calibration prompt."""
    logprob: float | None = None
    """Rolling loglikelihood of the whole text (language modeling)."""
    pick: int | None = None
    """The option chosen: the letter written (joint) or the best option under the main metric's
    rule (separate); None when the output names no option."""
    rendered_prompt: str | None = None
    """The item's first request after this model's chat template, when it has one: then this is
    what was sent."""


@dataclass
class Item:
    """One instance in one few-shot trial: the prompt as sent and every model's output."""

    id: str
    """instance_id."""
    trial: int
    """Few-shot trial index."""
    perturbation: str | None
    """Perturbation that made this variant; None for the original."""
    split: str
    """Dataset split."""
    metadata: dict
    """Scenario-specific facts (subject, ...), without original_id (the group says it)."""
    prompt: str
    """The prompt as sent, after the shared context `context` (if any)."""
    references: list[str]
    """Reference texts in order (the options, for multiple choice)."""
    gold: list[int]
    """Indices of the correct references."""
    outputs: list[Output]
    """One per model, in the payload's `models` order."""
    context: int | None = None
    """Index into the payload's `contexts`: the prompt's shared first part."""
    options: list[list[str]] | None = None
    """Separate multiple choice, when an option is not simply `prompt` + " " + reference (e.g.
    fill-in-the-blank): per option [what its prompt adds after `prompt`, the scored continuation]."""


@dataclass
class Group:
    """An original instance with its perturbation variants, shown side by side."""

    original_id: str
    """The original's instance_id."""
    trial: int
    """Few-shot trial index."""
    items: list[Item] = field(default_factory=list)
    """The original first, then its variants in the scenario's perturbation order."""


def _num(x: Any) -> float | None:
    """Rounded to 4 decimals; None for missing/NaN (JSON has no NaN)."""
    if x is None or math.isnan(x):
        return None
    return round(float(x), 4)


def score_metric_order(names: set[str], cfg: ScenarioConfig) -> list[str]:
    """Configured metrics in config order, then their worst-case companions, then anything else."""
    rank = {m: i for i, m in enumerate(cfg.metrics)}
    return sorted(names, key=lambda n: (rank.get(n.split("/")[0], len(rank)), "/" in n, n))


class _Model:
    """One model's completions (by request_id), per-instance scores (by instance, trial) and, for
    separate multiple choice, the option it picks (by the main metric's rule, as scored)."""

    def __init__(self, scenario: str, model: str, cfg: ScenarioConfig, options: pd.DataFrame | None):
        rows = read_parquet_input(completions_path(scenario, model), f"run `dvc repro infer@{scenario}-{model}`")
        self.completions = {r["request_id"]: r for r in rows}
        rows = read_parquet_input(scores_path(scenario, model), f"run `dvc repro score@{scenario}-{model}`")
        self.scores: dict[tuple[str, int], dict[str, float]] = {}
        for r in rows:
            self.scores.setdefault((r["instance_id"], r["trial"]), {})[r["metric"]] = r["value"]
        self.picks = self._picks(cfg, options) if options is not None else {}

    def _picks(self, cfg: ScenarioConfig, options: pd.DataFrame) -> dict[tuple[str, int], int]:
        """`options`: the scenario's loglikelihood requests, one frame shared by every model."""
        logprob = [self.completions.get(rid, {}).get("logprob") for rid in options["request_id"]]
        rows = choice_rows(options.assign(logprob=logprob))
        score = choice_rule(cfg.main_metric).score(rows)
        # an instance with an option left unanswered gets no pick
        scored = score.notna().groupby([rows["instance_id"], rows["trial"]]).transform("all")
        return {key: int(i) for key, i in picks(rows[scored], cfg.main_metric).items()}

    def get(self, request: dict, column: str) -> Any:
        return self.completions.get(request["request_id"], {}).get(column)


def _by_option(requests: list[dict], n: int, value) -> list:
    out = [None] * n
    for r in requests:
        if r["choice_index"] is not None and 0 <= r["choice_index"] < n:
            out[r["choice_index"]] = value(r)
    return out


def _output(
    model: _Model, cfg: ScenarioConfig, requests: list[dict], key: tuple[str, int], metrics: list[str], n_options: int
) -> Output:
    values = model.scores.get(key, {})
    out = Output(
        scores=[_num(values.get(m)) for m in metrics], rendered_prompt=model.get(requests[0], "rendered_prompt")
    )
    gen = [r for r in requests if r["method"] == "generate"]
    roll = [r for r in requests if r["method"] == "loglikelihood_rolling"]
    choice = [r for r in requests if r["method"] == "loglikelihood" and not r["calibration"]]
    cal = [r for r in requests if r["method"] == "loglikelihood" and r["calibration"]]
    if gen:
        out.text = model.get(gen[0], "text")
        if cfg.method == "multiple_choice_joint":
            out.pick = parse_letter(out.text, n_options)
    if roll:
        out.logprob = _num(model.get(roll[0], "logprob"))
    if choice:
        out.logprobs = _by_option(choice, n_options, lambda r: _num(model.get(r, "logprob")))
        if cal:
            out.calibration_logprobs = _by_option(cal, n_options, lambda r: _num(model.get(r, "logprob")))
        if not gen:  # separate multiple choice: the model "chooses" by its option scores
            out.pick = model.picks.get(key)
    return out


def _item(requests: list[dict], cfg: ScenarioConfig, models: list[_Model], metrics: list[str]) -> Item:
    head = requests[0]
    refs = head["references"]
    meta = {k: v for k, v in json.loads(head["metadata"] or "{}").items() if k != "original_id"}
    key = (head["instance_id"], head["trial"])
    main = [r for r in requests if r["method"] in ("generate", "loglikelihood_rolling")]
    options = None
    if main:
        prompt = main[0]["prompt"]
    else:  # separate multiple choice: the part the options' prompts share, once
        choice = sorted((r for r in requests if not r["calibration"]), key=lambda r: r["choice_index"] or 0)
        prompt = os.path.commonprefix([r["prompt"] for r in choice])
        options = [[r["prompt"][len(prompt) :], r["continuation"] or ""] for r in choice]
        if options == [["", " " + r["text"]] for r in refs]:
            options = None  # the usual form (prompt + " " + option): the references say it all
    return Item(
        id=key[0],
        trial=key[1],
        perturbation=head["perturbation"],
        split=head["split"],
        metadata=meta,
        prompt=prompt,
        references=[r["text"] for r in refs],
        gold=[i for i, r in enumerate(refs) if r["correct"]],
        options=options,
        outputs=[_output(m, cfg, requests, key, metrics, len(refs)) for m in models],
    )


def _share_contexts(items: list[tuple[tuple, Item]]) -> list[str]:
    """Move the prefix shared by prompts with the same few-shot examples into `contexts`, cut
    after the last blank line in it so the context ends at an example boundary."""
    by_shots: dict[tuple, list[Item]] = {}
    for shots, item in items:
        if shots:
            by_shots.setdefault((shots, item.trial), []).append(item)
    contexts: dict[str, int] = {}
    for group in by_shots.values():
        prefix = os.path.commonprefix([i.prompt for i in group])
        prefix = prefix[: prefix.rfind("\n\n") + 2] if "\n\n" in prefix else ""
        if len(group) < 2 or len(prefix) < MIN_CONTEXT:
            continue
        index = contexts.setdefault(prefix, len(contexts))
        for item in group:
            item.context, item.prompt = index, item.prompt[len(prefix) :]
    return list(contexts)


def _groups(items: list[Item], cfg: ScenarioConfig, originals: dict[str, str]) -> list[Group]:
    order = {p: i for i, p in enumerate(cfg.perturbations)}
    groups: dict[tuple[str, int], Group] = {}
    for item in items:  # a group sits where its first item is in the prompt file
        orig = originals.get(item.id, item.id)
        groups.setdefault((orig, item.trial), Group(orig, item.trial)).items.append(item)
    for g in groups.values():
        g.items.sort(
            key=lambda i: (
                i.perturbation is not None,
                order.get(i.perturbation, len(order)),
                i.perturbation or "",
                i.id,
            )
        )
    return list(groups.values())


def _compact(obj: Any) -> Any:
    """Dataclass dicts without None-valued keys (list entries keep their None: positions matter);
    NaN/inf (e.g. in dataset metadata) become None, since JSON has neither."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _compact(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_compact(v) for v in obj]
    return obj


def scenario_payload(run: RunConfig, scenario: str) -> dict:
    """Everything the scenario view shows, as plain JSON-able data in a stable order."""
    cfg = run.scenario[scenario]
    sources = read_json_input(sources_json(scenario), f"run `dvc repro fetch@{scenario}`")
    prompts = read_parquet_input(prompts_path(scenario), f"run `dvc repro prepare@{scenario}`")
    separate = cfg.method == "multiple_choice_separate"
    options = pd.DataFrame([r for r in prompts if r["method"] == "loglikelihood"]) if separate else None
    models = [_Model(scenario, m, cfg, options) for m in run.models]
    metrics = score_metric_order({k for m in models for v in m.scores.values() for k in v}, cfg)
    originals = {
        r["instance_id"]: json.loads(r["metadata"] or "{}").get("original_id") or r["instance_id"] for r in prompts
    }
    by_key: dict[tuple[str, int], list[dict]] = {}
    for r in prompts:  # dicts keep insertion order: instances stay in prompt-file order
        by_key.setdefault((r["instance_id"], r["trial"]), []).append(r)
    items = [(tuple(reqs[0]["few_shot_ids"] or ()), _item(reqs, cfg, models, metrics)) for reqs in by_key.values()]
    contexts = _share_contexts(items)
    main = get_metric(cfg.main_metric) if cfg.main_metric else None
    return _compact(
        {
            "scenario": scenario,
            "description": cfg.description,
            "taxonomy": cfg.taxonomy,
            "license": cfg.license,
            "citation": cfg.citation,
            "method": cfg.method,
            "metrics": cfg.metrics,
            "main_metric": cfg.main_metric,
            "eval_split": cfg.eval_split,
            "num_shots": cfg.num_shots,
            "perturbations": cfg.perturbations,
            "calibration_prompt": cfg.calibration_prompt,
            "sources": sources,
            "models": list(run.models),
            "score_metrics": metrics,
            "choice_rule": (
                choice_rule(cfg.main_metric).describe(bool(cfg.calibration_prompt))
                if cfg.method == "multiple_choice_separate"
                else None
            ),
            # Correct/incorrect only means something for a 0/1-style accuracy score.
            "filterable": bool(main and main.family == "accuracy" and main.higher_is_better),
            "contexts": contexts,
            "groups": [asdict(g) for g in _groups([i for _, i in items], cfg, originals)],
        }
    )
