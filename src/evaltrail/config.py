"""Typed views of params.yaml. Unknown or missing keys fail with the key's full path."""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import EvaltrailError
from .schema import REFUSAL_LABELS
from .sources import expand

PARAMS_FILE = "params.yaml"

IDENTIFIER = re.compile(r"[a-z][a-z0-9_]*")
"""Scenario, model, suite, judge and RAG names become paths (data/raw/<scenario>/, models/<model>/,
stage names), so only snake_case: no name can reach outside its directory."""
IDENTIFIER_TEXT = "a snake_case identifier ([a-z][a-z0-9_]*)"


def identifier(name: Any, what: str, where: str) -> str:
    if not (isinstance(name, str) and IDENTIFIER.fullmatch(name)):
        raise EvaltrailError(f"{where}: {what} {name!r} is not {IDENTIFIER_TEXT}; rename it")
    return name


@dataclass(frozen=True)
class Rule:
    """What a config field accepts beyond its annotated type; `build` checks both, so every
    params.yaml and conf load (`evaltrail validate` and each stage) refuses before any disk work."""

    min: float | None = None
    """Inclusive lower bound."""
    above: float | None = None
    """Exclusive lower bound."""
    max: float | None = None
    """Inclusive upper bound."""
    identifier: bool = False
    """The string names a path component (see IDENTIFIER)."""
    choices: tuple | None = None
    """The only values allowed."""
    pattern: str | None = None
    """A regular expression the whole string must match."""

    def admits(self, value: Any) -> bool:
        if value is None:  # the annotation decides whether null is allowed
            return True
        if self.identifier:
            return bool(IDENTIFIER.fullmatch(value))
        if self.choices is not None:
            return value in self.choices
        if self.pattern is not None:
            return bool(re.fullmatch(self.pattern, value))
        return (
            (self.min is None or value >= self.min)
            and (self.above is None or value > self.above)
            and (self.max is None or value <= self.max)
        )

    def describe(self) -> str:
        if self.identifier:
            return f" ({IDENTIFIER_TEXT})"
        if self.choices is not None:
            return f": one of {', '.join(map(str, self.choices))}"
        if self.pattern is not None:
            return f" matching {self.pattern}"
        if self.min is not None and self.max is not None:
            return f" in [{self.min}, {self.max}]"
        bounds = [f"{op} {b}" for op, b in ((">=", self.min), (">", self.above), ("<=", self.max)) if b is not None]
        return " " + " and ".join(bounds) if bounds else ""


def knob(default: Any = dataclasses.MISSING, **rule) -> Any:
    """A dataclass field with a Rule (keyword arguments of Rule) in its metadata."""
    return field(default=default, metadata={"rule": Rule(**rule)})


@dataclass(frozen=True)
class ScenarioConfig:
    name: str
    """snake_case name: conf file, registry key, stage suffix and results path."""
    method: str
    """Adapter: multiple_choice_joint | multiple_choice_separate | ..."""
    eval_split: str
    """Split whose instances are evaluated."""
    metrics: list[str]
    """Per-instance metrics to score."""
    main_metric: str | None
    """The leaderboard's number for this scenario (null: none yet, e.g. toxicity before its metrics)."""
    sources: list[dict]
    """Pinned source files (see evaltrail.sources)."""
    loader: str | None = None
    """The loader that reads the sources: a generic one (multiple_choice, generation: a plain
    JSONL/CSV/Parquet file, no Python), another scenario's (a variant of it), or, when unset, the
    one registered under the scenario's name."""
    num_shots: int = knob(0, min=0)
    """In-context examples per prompt."""
    train_split: str | None = None
    """Split the in-context examples are drawn from."""
    sample_group: str | None = None
    """Metadata key: max_eval_instances then applies per group (e.g. per MMLU subject)."""
    max_eval_instances: int | None = knob(None, min=1)
    """Overrides the run-level max_eval_instances for this scenario."""
    instructions: str | None = None
    """Prompt header; {field} placeholders are filled from instance metadata."""
    input_noun: str | None = None
    """Label before each input in the prompt (e.g. "Question"); None: the input stands alone."""
    output_noun: str | None = None
    """Label before each answer (e.g. "Answer"); None: the answer follows a space."""
    max_tokens: int | None = knob(None, min=1)
    """Generation length limit."""
    stop: list[str] = field(default_factory=list)
    """Generation stop sequences."""
    num_train_trials: int = knob(1, min=1)
    """Independent few-shot example sets; each is a `trial` in the artifacts."""
    num_samples: int = knob(1, min=1)
    """Generation: answers sampled per instance (1: the greedy answer); each sample is a `trial`,
    so per-instance metrics average over them and pass@k (evaltrail.metrics.accuracy) counts them."""
    temperature: float = knob(0.0, min=0)
    """Sampling temperature of num_samples > 1 (0: greedy, which needs num_samples 1)."""
    calibration_prompt: str | None = None
    """Separate MC, calibrated: also score each option after this bare prompt and subtract."""
    partial: bool = False
    """Separate MC, fill-in-the-blank ("_" in the input): score the text after the blank."""
    max_malformed: int = knob(0, min=0)
    """Raw rows that may be skipped as malformed (each reported with file:line); more fail the stage."""
    description: str | None = None
    """One line on what the scenario measures."""
    taxonomy: dict = field(default_factory=dict)
    """Leaderboard group (GROUPS) and HELM taxonomy: task, domain (what), risk (HELM Safety), language,
    who, when (TAXONOMY)."""
    license: str | None = None
    """Licence of the data as evaluated."""
    citation: str | None = None
    """How to cite the dataset."""
    perturbations: list[str] = field(default_factory=list)
    """Robustness/fairness perturbations (evaltrail.perturbations names): each makes a variant of
    every evaluated instance that goes through the same inference and is scored worst-case."""
    options: dict = field(default_factory=dict)
    """Loader-specific keys (e.g. mmlu's subjects), checked by the scenario's loader."""


BACKEND_NEEDS = {"llama_cpp": ("weights", "n_ctx", "n_batch"), "openai": ("server",), "hf": ("hf",)}
"""Each model backend (evaltrail.backends) and the ModelConfig keys it requires."""

SHA256_OF = {
    "llama_cpp": "weights (the GGUF file)",
    "hf": "files (each file's sha256, by name)",
    "openai": "served (the server's identity; no weights)",
}
"""What each backend's model sha256 hashes (model.json's `sha256_of`, and the report's): the client
cannot verify a served model's weights, only what the server says it serves."""


@dataclass(frozen=True)
class ServerConfig:
    """A served model's `server` mapping (backend openai, evaltrail.backends.openai)."""

    base_url: str = knob(pattern=r"https?://[^\s/?#]+(/\S*)?")
    """The API root, e.g. http://127.0.0.1:8000/v1 (credentials never belong here)."""
    model: str
    """The name the server serves the model under (the `model` field of each request)."""
    api_key_env: str | None = None
    """Environment variable holding the API key; None: the server needs none."""
    concurrency: int = knob(4, min=1)
    """Requests in flight at once."""
    timeout_s: float = knob(120.0, above=0)
    """Per-request timeout (connect, read, write) in seconds."""
    max_retries: int = knob(6, min=0)
    """Retries of a request after a 429, 5xx, timeout or truncated body, before the run fails."""
    extra_body: dict = field(default_factory=dict)
    """Fields added to every request for server-specific decoding (llama.cpp's server:
    {repeat_penalty: 1.0}, or its default 1.1 makes "greedy" generations differ)."""


@dataclass(frozen=True)
class HFConfig:
    """A local transformers model's `hf` mapping (backend hf, evaltrail.backends.hf)."""

    path: str
    """Directory holding config.json, the weights and the tokenizer (save_pretrained's layout)."""
    dtype: str = knob("float32", choices=("float32", "float16", "bfloat16"))
    """torch dtype the weights are loaded in (float32: CPU-exact; bfloat16 halves memory)."""
    max_length: int | None = knob(None, min=1)
    """Context window in tokens; None: the model config's max_position_embeddings."""


@dataclass(frozen=True)
class ModelConfig:
    name: str
    """snake_case name: conf file, stage suffix and results file name."""
    backend: str = knob(choices=tuple(BACKEND_NEEDS))
    """llama_cpp (embedded GGUF) | openai (any OpenAI-compatible server) | hf (local transformers directory)."""
    weights: dict | None = None
    """llama_cpp: sha256 of the whole file, license, and the parts it is assembled from."""
    n_ctx: int | None = knob(None, min=1)
    """llama_cpp: context window in tokens."""
    n_batch: int | None = knob(None, min=1)
    """llama_cpp: prompt tokens per decode call."""
    server: dict | None = None
    """openai: base_url, model, api_key_env, concurrency, timeout_s, max_retries (ServerConfig)."""
    hf: dict | None = None
    """hf: path of a local transformers directory, dtype, max_length (HFConfig)."""
    n_threads: int | None = knob(None, min=1)
    """CPU threads; None means all cores."""
    prefix_reuse: bool = True
    """Reuse the KV cache of a shared, grid-aligned token prefix (bit-identical results); false
    evaluates every prompt from scratch."""
    chat_template: bool = False
    """Wrap prompts in the chat template the GGUF carries (instruct models); the rendered text
    is stored with each completion."""


@dataclass(frozen=True)
class BattleConfig:
    """One scenario's pairwise battles (conf/judge/): who judges, whom, and with what prompt."""

    scenario: str
    """The generation scenario whose answers are judged (the key under `battle`)."""
    judge: str
    """The judging model: a key of `model` (its fetched weights or served identity is the judge's)."""
    template: str
    """Judge prompt with {instruction}, {first}, {second} (evaltrail.judge.arena.JudgePrompt)."""
    labels: dict
    """Verdict labels the judge may answer -> first / second / tie."""
    max_tokens: int = knob(min=1)
    """Generation budget of one verdict."""
    stop: list[str]
    """Stop sequences of a verdict."""
    method: str = "generate"
    """generate: the judge writes a label; logprob: each label's logprob is read (JudgePrompt.method)."""
    tie_margin: float = knob(0.0, min=0)
    """logprob: a summed margin at most this far from 0 is a tie."""
    contestants: list[str] | None = None
    """Models whose answers battle; None: every model of the run."""
    max_answer_chars: int | None = knob(None, min=1)
    """Each answer is cut to this many characters in the judge prompt (fits a small judge's window)."""
    penalty_C: float | None = knob(None, above=0)
    """None: unpenalized Bradley-Terry MLE; a number: scikit-learn's inverse L2 strength C."""

    def models(self, run_models: list[str]) -> list[str]:
        return sorted(self.contestants if self.contestants is not None else run_models)

    def prompt(self):
        from .judge.arena import JudgePrompt

        return JudgePrompt(
            self.template, dict(self.labels), int(self.max_tokens), list(self.stop), self.method, float(self.tie_margin)
        )


@dataclass(frozen=True)
class RefusalConfig:
    """A scenario's judge refusal classifier (conf/refusal/): judge model, prompt, label continuations."""

    scenario: str
    """The XSTest-style scenario (the key under `refusal`)."""
    judge: str
    """The judging model: a key of `model`."""
    prompt: str
    """The judge's prompt with {question} and {answer}; each label's continuation is scored after it."""
    labels: dict
    """full_compliance / full_refusal / partial_refusal -> the continuation whose logprob stands for it."""

    def __post_init__(self):
        where = f"params.yaml: refusal.{self.scenario}"
        lacking = [f for f in ("{question}", "{answer}") if f not in self.prompt]
        if lacking:
            raise EvaltrailError(f"{where}.prompt: the prompt lacks {lacking[0]}")
        if sorted(self.labels) != sorted(REFUSAL_LABELS):
            raise EvaltrailError(
                f"{where}.labels: need exactly {', '.join(REFUSAL_LABELS)}; got {', '.join(map(str, self.labels))}"
            )
        texts = [str(t) for t in self.labels.values()]
        if len(set(texts)) < len(texts) or not all(t.strip() for t in texts):
            raise EvaltrailError(f"{where}.labels: each label needs its own non-empty continuation")


@dataclass(frozen=True)
class RagConfig:
    """A scenario's RAG judging (conf/rag/): judge model, verdict method, prompts, embeddings."""

    scenario: str
    """The RAG scenario (the key under `rag`)."""
    judge: str
    """The judging model: a key of `model`."""
    supported: str
    """Faithfulness check: {contexts}, {statement} -> yes/no."""
    useful: str
    """Context precision check: {question}, {reference}, {context} -> yes/no."""
    attributed: str
    """Context recall check: {contexts}, {statement} -> yes/no."""
    question: str
    """Answer relevancy: {answer} -> a question (generated)."""
    method: str = "logprob"
    """Yes/no checks: logprob compares the judge's logprob of the two labels; generate parses its reply."""
    yes_label: str = "Yes"
    """The yes label (continuation in logprob mode)."""
    no_label: str = "No"
    """The no label."""
    max_tokens: int = knob(3, min=1)
    """generate: budget of a yes/no reply."""
    question_max_tokens: int = knob(32, min=1)
    """Budget of the generated question."""
    embedding: str = knob("embedding", identifier=True)
    """Directory under data/raw/<scenario>/ holding the sentence-embedding model's pinned files."""

    def __post_init__(self):
        if self.method not in ("logprob", "generate"):
            raise EvaltrailError(f"params.yaml: rag.{self.scenario}.method: {self.method!r}; use logprob or generate")
        for key, fields in (
            ("supported", ("{contexts}", "{statement}")),
            ("attributed", ("{contexts}", "{statement}")),
            ("useful", ("{question}", "{reference}", "{context}")),
            ("question", ("{answer}",)),
        ):
            lacking = [f for f in fields if f not in getattr(self, key)]
            if lacking:
                raise EvaltrailError(f"params.yaml: rag.{self.scenario}.{key}: the prompt lacks {lacking[0]}")


@dataclass(frozen=True)
class RunConfig:
    seed: int = knob(min=0)
    """Seeds sampling, few-shot draws and bootstrap CIs (numpy takes no negative seed)."""
    max_eval_instances: int | None = knob(min=1)
    """Evaluated instances per scenario (per group); null: all."""
    bootstrap_samples: int = knob(min=1)
    """Resamples behind every CI (the battle ratings need at least one)."""
    scenarios: list[str]
    models: list[str]
    scenario: dict[str, ScenarioConfig]
    model: dict[str, ModelConfig]
    mlflow: dict
    resources: dict = field(default_factory=dict)
    """Pinned word lists (name -> source) that perturbations and bias metrics read."""
    reproduce: dict = field(default_factory=dict)
    """A model card's published rows this suite reproduces (evaltrail.aggregate.reproduction)."""
    battle: dict[str, BattleConfig] = field(default_factory=dict)
    """Scenario -> its judged pairwise battles (the battle stage)."""
    rag: dict[str, RagConfig] = field(default_factory=dict)
    """Scenario -> its judged RAG metrics (the rag stage)."""
    refusal: dict[str, RefusalConfig] = field(default_factory=dict)
    """Scenario -> its judge refusal classifier (the refusal stage)."""
    battle_scenarios: list[str] = field(default_factory=list)
    """Derived: the keys of `battle` (aggregate depends on this, not on the judge configs)."""
    rag_scenarios: list[str] = field(default_factory=list)
    """Derived: the keys of `rag`."""
    refusal_scenarios: list[str] = field(default_factory=list)
    """Derived: the keys of `refusal`."""
    engine: Any = None
    """The pinned llama.cpp build (EngineConfig); None where params.yaml has none."""


@dataclass(frozen=True)
class EngineConfig:
    """params.yaml `engine`: which llama.cpp computes every logprob."""

    source: dict
    """The llama-cpp-python sdist on PyPI: package, version, sha256, license."""
    profile: str
    """Name of the pinned kernel profile (e.g. x86_64_avx2)."""
    arch: str
    """Machine architecture the pinned profile runs on (platform.machine())."""
    cmake_args: tuple[str, ...]
    """CMake flags that fix the profile's instruction sets (no build-time CPU detection)."""
    kernels: str = "pinned"
    """pinned: the profile above; native: this CPU's own kernels (-march=native), another identity."""
    sha256: str | None = None
    """Identity of the pinned build (sha256 over its libraries) on the reference toolchain."""


def engine_config(raw: dict | None, where: str = "params.yaml: engine") -> EngineConfig:
    if not isinstance(raw, dict):
        raise EvaltrailError(f"{where}: missing; it pins the llama.cpp build (see conf/config.yaml)")
    src = raw.get("source") or {}
    for key in ("package", "version", "sha256"):
        if not src.get(key):
            raise EvaltrailError(f"{where}.source.{key}: required (the pinned llama-cpp-python sdist)")
    kernels = raw.get("kernels", "pinned")
    if kernels not in ("pinned", "native"):
        raise EvaltrailError(f"{where}.kernels: {kernels!r}; valid: pinned, native")
    args = raw.get("cmake_args")
    if not isinstance(args, list) or not all(isinstance(a, str) and a.startswith("-D") for a in args):
        raise EvaltrailError(f"{where}.cmake_args: expected a list of -DNAME=VALUE flags")
    return EngineConfig(
        source=dict(src),
        profile=str(raw.get("profile")),
        arch=str(raw.get("arch")),
        cmake_args=tuple(args),
        kernels=kernels,
        sha256=raw.get("sha256"),
    )


_NOUNS = {
    int: "an integer",
    float: "a number",
    str: "a string",
    bool: "true or false",
    dict: "a mapping",
    list: "a list",
    type(None): "null",
}
_PLURALS = {int: "integers", float: "numbers", str: "strings", dict: "mappings"}


def _accepts(tp: Any, value: Any) -> bool:
    """Whether a YAML value fits a field's annotation; bool is no number here (`true` would count as 1)."""
    origin, args = typing.get_origin(tp) or tp, typing.get_args(tp)
    if tp is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_accepts(a, value) for a in args)
    if tp in (int, float) and isinstance(value, bool):
        return False
    if tp is float:  # an integer is a number; NaN and infinities pass no range check
        return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))
    if not isinstance(value, origin):
        return False
    if origin is list and args:
        return all(_accepts(args[0], v) for v in value)
    if origin is dict and args:
        return all(_accepts(args[0], k) and _accepts(args[1], v) for k, v in value.items())
    return True


def _noun(tp: Any) -> str:
    origin, args = typing.get_origin(tp) or tp, typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(sorted((_noun(a) for a in args), key=lambda n: n != "null"))
    if origin is list and args and args[0] in _PLURALS:
        return f"a list of {_PLURALS[args[0]]}"
    return _NOUNS.get(origin, getattr(origin, "__name__", str(origin)))


@functools.cache
def _fields(cls) -> tuple[tuple[str, Any, Rule], ...]:
    """(name, resolved annotation, rule) of each field of a config dataclass."""
    hints = typing.get_type_hints(cls)
    return tuple((f.name, hints[f.name], f.metadata.get("rule", Rule())) for f in dataclasses.fields(cls))


def key_of(where: str, key: str) -> str:
    """`key` below `where`: a file ("params.yaml: seed") or a file and a key ("params.yaml: model.x.n_ctx")."""
    return f"{where}.{key}" if ": " in where else f"{where}: {key}"


def build(cls, data: Any, where: str, **fixed):
    """Construct dataclass `cls` from a mapping, naming `where` on any bad key, and each value
    checked against its field's type and Rule."""
    if not isinstance(data, dict):
        raise EvaltrailError(f"{where}: expected a mapping, got {type(data).__name__}")
    names = [f.name for f in dataclasses.fields(cls)]
    extra = {}
    if "options" in names:  # scenario: unknown keys go to the loader, which validates them
        extra = {k: v for k, v in data.items() if k not in names}
        data = {k: v for k, v in data.items() if k in names}
        data["options"] = extra
    for k in sorted(set(data) & set(fixed)):  # e.g. a model's name: its key under `model` says it
        if data[k] != fixed[k]:
            raise EvaltrailError(
                f"{key_of(where, k)}: {data[k]!r} differs from {fixed[k]!r}, which its place "
                f"in the config sets; remove the key"
            )
    data = {k: v for k, v in data.items() if k not in fixed}
    unknown = sorted(set(data) - set(names), key=str)
    if unknown:
        raise EvaltrailError(
            f"{key_of(where, unknown[0])}: unknown key; valid keys: {', '.join(n for n in names if n not in fixed)}"
        )
    required = [
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    missing = [n for n in required if n not in data and n not in fixed]
    if missing:
        raise EvaltrailError(f"{key_of(where, missing[0])}: missing required key (see conf/)")
    for name, tp, rule in _fields(cls):
        if name in data and not (_accepts(tp, data[name]) and rule.admits(data[name])):
            shown = repr(data[name])
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            raise EvaltrailError(f"{key_of(where, name)}: {shown}; expected {_noun(tp)}{rule.describe()}")
    return cls(**fixed, **data)


TAXONOMY = ("group", "task", "domain", "risk", "language", "who", "when")
"""The keys of a scenario's taxonomy: the leaderboard group (GROUPS), HELM's (task; what: domain;
who; when; language) and HELM Safety's risk."""

GROUPS = {
    "question_answering": "Question answering",
    "knowledge": "Knowledge",
    "reasoning": "Reasoning",
    "math": "Reasoning: math",
    "code": "Reasoning: code",
    "language": "Language",
    "sentiment_analysis": "Sentiment analysis",
    "summarization": "Summarization",
    "instruction_following": "Instruction following",
    "harms": "Harms: bias and toxicity",
    "safety": "Safety: refusal",
}
"""taxonomy.group -> its heading, in leaderboard order: HELM Classic's core and targeted categories
(question answering, knowledge, reasoning with its math and code parts, language, sentiment
analysis, summarization, harms), HELM Capabilities' instruction following and HELM Safety's
refusal. A scenario without a group is listed under OTHER."""

OTHER = "Other"


def build_scenario(data: Any, where: str, name: str) -> ScenarioConfig:
    """A ScenarioConfig with its `files` source groups expanded to one source per file."""
    if isinstance(data, dict) and "sources" in data:
        data = {**data, "sources": expand(data["sources"], f"{where}.sources")}
    taxonomy = data.get("taxonomy") if isinstance(data, dict) else None
    if isinstance(taxonomy, dict):
        unknown = sorted(set(map(str, taxonomy)) - set(TAXONOMY))
        if unknown:  # also what an unquoted comma inside a YAML flow mapping leaves behind
            raise EvaltrailError(
                f"{key_of(where, 'taxonomy')}.{unknown[0]}: unknown taxonomy key; valid: {', '.join(TAXONOMY)} "
                "(quote a value that holds a comma)"
            )
        group = taxonomy.get("group")
        if group is not None and group not in GROUPS:
            raise EvaltrailError(
                f"{key_of(where, 'taxonomy')}.group: {group!r} is no leaderboard group; valid: {', '.join(GROUPS)}"
            )
    cfg = build(ScenarioConfig, data, where, name=name)
    sampled = cfg.num_samples > 1
    if sampled and cfg.method != "generation":
        raise EvaltrailError(f"{key_of(where, 'num_samples')}: sampling needs method generation; set it to 1")
    if sampled != (cfg.temperature > 0):
        raise EvaltrailError(
            f"{key_of(where, 'temperature')}: {cfg.temperature} with num_samples {cfg.num_samples}; sample "
            "several answers at a temperature above 0, or one greedy answer at 0"
        )
    if sampled and cfg.num_train_trials > 1:
        raise EvaltrailError(
            f"{key_of(where, 'num_train_trials')}: samples are the trials of a sampled scenario; set it to 1"
        )
    return cfg


def group_of(cfg: ScenarioConfig) -> str:
    """The heading a scenario's leaderboard columns sit under."""
    return GROUPS.get(cfg.taxonomy.get("group"), OTHER)


def _check_references(scen: dict, mods: dict, battles: dict, judged: dict, source: str) -> None:
    """Battles, RAG checks and refusal judges name a scenario, a judge and contestants of the same run."""
    for n, b in battles.items():
        where = f"{source}: battle.{n}"
        if n not in scen:
            raise EvaltrailError(f"{where}: battles need scenario {n!r} in the run; add it to the suite's defaults")
        if b.judge not in mods:
            raise EvaltrailError(
                f"{where}.judge: {b.judge!r} is not a model of the run; add it to the suite's "
                f"defaults (valid: {', '.join(sorted(mods))})"
            )
        contestants = b.models(list(mods))
        if unknown := sorted(set(contestants) - set(mods)):
            raise EvaltrailError(
                f"{where}.contestants: {unknown[0]!r} is not a model of the run (valid: {', '.join(sorted(mods))})"
            )
        if len(set(contestants)) < 2:
            raise EvaltrailError(f"{where}.contestants: a battle needs at least two models, got {contestants}")
    for group, configs in judged.items():
        for n, r in configs.items():
            if n not in scen:
                raise EvaltrailError(
                    f"{source}: {group}.{n}: judging needs scenario {n!r} in the run; add it to the suite"
                )
            if r.judge not in mods:
                raise EvaltrailError(
                    f"{source}: {group}.{n}.judge: {r.judge!r} is not a model of the run; add it to the "
                    f"suite's defaults (valid: {', '.join(sorted(mods))})"
                )


def parse_params(raw: dict, source: str = PARAMS_FILE, whole: bool = True) -> RunConfig:
    """The typed run config. `whole=False` reads one stage's slice (evaltrail.stage_params): the
    references between groups (a battle's scenario, judge and contestants) were checked on the whole."""
    raw = dict(raw)
    # their keys become paths: check before anything else
    for group in ("scenario", "model", "battle", "rag", "refusal"):
        named = raw.get(group) or {}
        if not isinstance(named, dict):
            raise EvaltrailError(f"{source}: {group}: expected a mapping of name -> config")
        for name in named:
            identifier(name, f"{group} key", source)
    scen = {n: build_scenario(c, f"{source}: scenario.{n}", n) for n, c in (raw.pop("scenario", None) or {}).items()}
    for n, c in scen.items():
        if c.main_metric is not None and c.main_metric not in c.metrics:
            raise EvaltrailError(
                f"{source}: scenario.{n}.main_metric: {c.main_metric!r} is not among "
                f"its metrics ({', '.join(c.metrics)})"
            )
    mods = {n: build(ModelConfig, c, f"{source}: model.{n}", name=n) for n, c in (raw.pop("model", None) or {}).items()}
    for n, m in mods.items():
        lacking = [k for k in BACKEND_NEEDS[m.backend] if getattr(m, k) is None]
        if lacking:
            raise EvaltrailError(f"{source}: model.{n}.{lacking[0]}: required by backend {m.backend} (see conf/model/)")
        if m.backend == "openai":  # the backends build these again when they run; here so validate sees them
            build(ServerConfig, m.server, f"{source}: model.{n}.server")
        elif m.backend == "hf":
            build(HFConfig, m.hf, f"{source}: model.{n}.hf")
    battles = {
        n: build(BattleConfig, c, f"{source}: battle.{n}", scenario=n)
        for n, c in (raw.pop("battle", None) or {}).items()
    }
    for n, b in battles.items():
        try:
            b.prompt()
        except EvaltrailError as exc:
            raise EvaltrailError(f"{source}: battle.{n}.template/labels: {exc} (see conf/judge/)") from None
    rag = {n: build(RagConfig, c, f"{source}: rag.{n}", scenario=n) for n, c in (raw.pop("rag", None) or {}).items()}
    refusal = {
        n: build(RefusalConfig, c, f"{source}: refusal.{n}", scenario=n)
        for n, c in (raw.pop("refusal", None) or {}).items()
    }
    if whole:
        _check_references(scen, mods, battles, {"rag": rag, "refusal": refusal}, source)
    engine = raw.pop("engine", None)
    engine = None if engine is None else engine_config(engine, f"{source}: engine")
    return build(
        RunConfig,
        {**raw, "scenario": scen, "model": mods, "battle": battles, "rag": rag, "refusal": refusal, "engine": engine},
        source,
    )


def yaml_error(exc: yaml.YAMLError | UnicodeDecodeError, path: str | Path, fix: str) -> EvaltrailError:
    """One line naming the file and line of a YAML problem; the file is yaml's own mark where it
    has one (Hydra's errors come from whichever conf file a composition read)."""
    if isinstance(exc, UnicodeDecodeError):  # Hydra's reads say no more than the byte
        return EvaltrailError(f"{path}: not UTF-8 text (byte {exc.start}); {fix}")
    mark = getattr(exc, "problem_mark", None)
    name = mark.name if mark and mark.name and not mark.name.startswith("<") else str(path)
    try:
        name = str(Path(name).relative_to(Path.cwd()))  # Hydra reads conf/ by absolute path
    except ValueError:
        pass
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return EvaltrailError(f"{name}: not valid YAML{where}: {problem}; {fix}")


def read_yaml(path: str | Path, fix: str = "fix it") -> Any:
    from .io import read_text  # here, not at the top: io imports pyarrow, which no config read needs

    text = read_text(path, fix)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise yaml_error(exc, path, fix) from None


def load_params(path: str | Path = PARAMS_FILE) -> RunConfig:
    return parse_params(read_params(path), str(path))


def read_params(path: str | Path = PARAMS_FILE) -> dict:
    """params.yaml as plain data, before any check of its keys."""
    path = Path(path)
    if not path.exists():
        raise EvaltrailError(f"{path}: not found; compose it with `dvc exp run` (or run from the repo root)")
    raw = read_yaml(path, "fix it, or recompose it from conf/ with `dvc exp run`")
    if not isinstance(raw, dict):
        raise EvaltrailError(
            f"{path}: expected a mapping at the top, got {type(raw).__name__}; recompose it with `dvc exp run`"
        )
    return raw


def scenario_config(run: RunConfig, name: str) -> ScenarioConfig:
    if name not in run.scenario:
        raise EvaltrailError(
            f"unknown scenario {name!r} in params.yaml; valid: {', '.join(sorted(run.scenario)) or '(none)'}"
        )
    return run.scenario[name]


def model_config(run: RunConfig, name: str) -> ModelConfig:
    if name not in run.model:
        raise EvaltrailError(
            f"unknown model {name!r} in params.yaml; valid: {', '.join(sorted(run.model)) or '(none)'}"
        )
    return run.model[name]


def scenario_from_conf(name: str, conf_dir: str | Path = "conf") -> ScenarioConfig:
    """One scenario's config composed by Hydra from conf/scenario/<name>.yaml alone (no suite),
    exactly as `dvc exp run` would put it in params.yaml; for checks and tests."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    where = f"{conf_dir}/scenario/{name}.yaml"
    identifier(name, "scenario name", where)  # before Hydra turns it into a path
    conf_dir = Path(conf_dir).resolve()
    try:
        with initialize_config_dir(str(conf_dir), version_base=None):
            cfg = compose("config", overrides=["~suite", f"+scenario@scenario.{name}={name}"])
        raw = OmegaConf.to_container(cfg.scenario[name], resolve=True)
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise yaml_error(exc, where, "fix it") from None
    except (HydraException, OmegaConfBaseException) as exc:
        raise EvaltrailError(
            f"{where}: {str(exc).splitlines()[0]}; valid: "
            + ", ".join(sorted(p.stem for p in (conf_dir / "scenario").glob("*.yaml")))
        ) from None
    return build_scenario(raw, where, name)


def run_from_conf(overrides: list[str] | tuple[str, ...] = (), conf_dir: str | Path = "conf") -> RunConfig:
    """The run config Hydra composes from conf/ with `overrides` (e.g. "suite=core"), exactly as
    `dvc exp run -S ...` would write params.yaml; for checks, tests and benchmarks."""
    return parse_params(composed_params(overrides, conf_dir), f"{conf_dir} composed with {list(overrides)}")


def composed_params(overrides: list[str] | tuple[str, ...] = (), conf_dir: str | Path = "conf") -> dict:
    """What `dvc exp run -S <overrides>` writes to params.yaml, as plain data (Hydra, resolved)."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    try:
        with initialize_config_dir(str(Path(conf_dir).resolve()), version_base=None):
            cfg = compose("config", overrides=list(overrides))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise yaml_error(exc, conf_dir, "fix it") from None
    return OmegaConf.to_container(cfg, resolve=True)


def resources_from_conf(conf_dir: str | Path = "conf") -> dict:
    """The run-level pinned word lists (`resources` in conf/config.yaml), for checks and tests."""
    return dict((read_yaml(Path(conf_dir) / "config.yaml") or {}).get("resources") or {})
