"""The data model shared by every stage; Parquet columns mirror these dataclasses."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pyarrow as pa

from .hashing import stable_id

METHODS = ("generate", "loglikelihood", "loglikelihood_rolling")

REFUSAL_LABELS = ("full_compliance", "full_refusal", "partial_refusal")
"""XSTest's three labels of an answer, in its order (its files write them as 1_full_compliance, ...):
what every refusal classifier, string match or judge, outputs."""


@dataclass(frozen=True)
class Reference:
    text: str
    """An option or gold answer as written in the dataset."""
    correct: bool
    """Whether this reference counts as a right answer."""


@dataclass(frozen=True)
class Instance:
    instance_id: str
    """Truncated sha256 of the canonical input + references: stable under row reordering."""
    split: str
    """Dataset split the instance comes from (test, validation, dev, ...)."""
    input: str
    """The question / context as the dataset gives it, before any prompt template."""
    references: tuple[Reference, ...]
    """For multiple choice: every option in order, the right one(s) flagged correct."""
    metadata: dict = field(default_factory=dict, hash=False, compare=False)
    """Scenario-specific facts (subject, category, source id, ...)."""
    perturbation: str | None = None
    """Name of the perturbation that made this variant; None for the original."""

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(r.text for r in self.references)

    @property
    def gold_indices(self) -> tuple[int, ...]:
        return tuple(i for i, r in enumerate(self.references) if r.correct)


def make_instance(
    split: str, input: str, references: list[Reference], metadata: dict | None = None, distinct: dict | None = None
) -> Instance:
    """Build an Instance whose id is the hash of its content (never its row position). `distinct`:
    metadata that is content too, because the prompt renders it (MMLU's subject where two subjects
    share a question); absent, the id is the input and references' hash alone."""
    content = {"input": input, "references": [[r.text, r.correct] for r in references]}
    if distinct:
        content["distinct"] = distinct
    return Instance(stable_id(content), split, input, tuple(references), dict(metadata or {}))


@dataclass(frozen=True)
class Request:
    request_id: str
    """Hash of (instance, trial, option index, method, prompt, continuation, generation params)."""
    instance_id: str
    """The instance this request serves."""
    method: str
    """generate | loglikelihood | loglikelihood_rolling."""
    prompt: str
    """Exactly the text sent to the model."""
    continuation: str | None = None
    """For loglikelihood: the text whose logprob given the prompt is scored."""
    choice_index: int | None = None
    """For separate multiple choice: which option the continuation is."""
    max_tokens: int | None = None
    """For generate: maximum new tokens (greedy decoding)."""
    stop: tuple[str, ...] = ()
    """For generate: stop sequences."""
    few_shot_ids: tuple[str, ...] = ()
    """instance_ids of the in-context examples, in prompt order."""
    trial: int = 0
    """Index of the few-shot example set (num_train_trials), or of the sample (num_samples)."""
    calibration: bool = False
    """Separate MC, calibrated: this request scores the option after the bare calibration prompt."""
    temperature: float | None = None
    """For a sampled generate (num_samples > 1): the sampling temperature; None: greedy."""
    seed: int | None = None
    """For a sampled generate: the seed of its draws (from the run's seed, the instance and the sample)."""

    def content(self) -> dict:
        """What determines a model's answer; the request cache keys on this (plus the model)."""
        return content(
            self.method, self.prompt, self.continuation, self.max_tokens, self.stop, self.temperature, self.seed
        )


def content(method, prompt, continuation, max_tokens, stop, temperature=None, seed=None) -> dict:
    """A request's content: what the cache keys on. `sampling` appears only for a sampled
    request, so a greedy request's content (and every id and cache key made from it) is as it was
    before sampling existed."""
    out = {
        "method": method,
        "prompt": prompt,
        "continuation": continuation,
        "max_tokens": max_tokens,
        "stop": list(stop),
    }
    if temperature is not None:
        out["sampling"] = {"temperature": float(temperature), "seed": int(seed)}
    return out


def make_request(instance_id: str, trial: int, method: str, prompt: str, **kw) -> Request:
    if method not in METHODS:
        raise ValueError(f"unknown request method {method!r}; valid: {', '.join(METHODS)}")
    draft = Request("", instance_id, method, prompt, trial=trial, **kw)
    marks = {"calibration": True} if draft.calibration else {}  # absent when false: ids stay as before
    if draft.choice_index is not None:  # two options with the same text are still two requests
        marks["choice_index"] = draft.choice_index
    rid = stable_id({"instance_id": instance_id, "trial": trial, **marks, **draft.content()})
    return Request(rid, instance_id, method, prompt, trial=trial, **kw)


# Parquet schemas: explicit, so every scenario's artifacts have the same columns and types.
REFERENCE_TYPE = pa.list_(pa.struct([("text", pa.string()), ("correct", pa.bool_())]))

PROMPTS_SCHEMA = pa.schema(
    [
        ("request_id", pa.string()),
        ("instance_id", pa.string()),
        ("split", pa.string()),
        ("input", pa.string()),
        ("references", REFERENCE_TYPE),
        ("metadata", pa.string()),
        ("perturbation", pa.string()),
        ("method", pa.string()),
        ("prompt", pa.string()),
        ("continuation", pa.string()),
        ("choice_index", pa.int32()),
        ("max_tokens", pa.int32()),
        ("stop", pa.list_(pa.string())),
        ("few_shot_ids", pa.list_(pa.string())),
        ("trial", pa.int32()),
        ("calibration", pa.bool_()),
        ("temperature", pa.float64()),
        ("seed", pa.int64()),
    ]
)

COMPLETIONS_SCHEMA = pa.schema(
    [
        ("request_id", pa.string()),
        ("text", pa.string()),
        ("logprob", pa.float64()),
        ("is_greedy", pa.bool_()),
        ("token_logprobs", pa.list_(pa.float64())),
        ("num_prompt_tokens", pa.int32()),
        ("num_output_tokens", pa.int32()),
        ("num_evaluated_tokens", pa.int32()),
        ("truncated_tokens", pa.int32()),
        ("rendered_prompt", pa.string()),  # the prompt as the chat template rendered it; null without one
        ("runtime_s", pa.float64()),
        ("model_sha256", pa.string()),
    ]
)

MEASURED_COLUMNS = ("num_evaluated_tokens", "runtime_s")
"""What an answer records of the machine (seconds) and of the run's history (prompt tokens a warm KV
cache spared): kept in the request cache and in results/costs, never in results/completions, so
that file depends on pinned inputs alone and is byte-identical on any machine with the pinned engine."""

IDENTITY_KEY = "evaltrail.identity"
"""Schema metadata key of a completions file: the canonical JSON of the model identity (weights,
engine, settings) its answers were computed under, for `verify` and `cache import`."""

STORED_COMPLETIONS_SCHEMA = pa.schema([f for f in COMPLETIONS_SCHEMA if f.name not in MEASURED_COLUMNS])
"""results/completions/<scenario>/<model>.parquet: the answers without their measurements."""

SCORES_SCHEMA = pa.schema(
    [
        ("instance_id", pa.string()),
        ("metric", pa.string()),
        ("value", pa.float64()),
        ("perturbation", pa.string()),
        ("trial", pa.int32()),
        ("original_id", pa.string()),  # the instance a variant was made from; its own id for an original
    ]
)


def prompts_table(pairs: list[tuple[Instance, Request]]) -> pa.Table:
    """Rows are requests joined with their instance, in the order given."""
    cols: dict[str, list] = {name: [] for name in PROMPTS_SCHEMA.names}
    for inst, req in pairs:
        row = {
            "request_id": req.request_id,
            "instance_id": inst.instance_id,
            "split": inst.split,
            "input": inst.input,
            "references": [{"text": r.text, "correct": r.correct} for r in inst.references],
            "metadata": json.dumps(inst.metadata, sort_keys=True, ensure_ascii=False),
            "perturbation": inst.perturbation,
            "method": req.method,
            "prompt": req.prompt,
            "continuation": req.continuation,
            "choice_index": req.choice_index,
            "max_tokens": req.max_tokens,
            "stop": list(req.stop),
            "few_shot_ids": list(req.few_shot_ids),
            "trial": req.trial,
            "calibration": req.calibration,
            "temperature": req.temperature,
            "seed": req.seed,
        }
        for k, v in row.items():
            cols[k].append(v)
    return pa.table(cols, schema=PROMPTS_SCHEMA)
