"""Typed views of params.yaml. Unknown or missing keys fail with the key's full path."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .engine import engine_config
from .errors import EvaltrailError
from .sources import expand

PARAMS_FILE = "params.yaml"


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
    num_shots: int = 0
    """In-context examples per prompt."""
    train_split: str | None = None
    """Split the in-context examples are drawn from."""
    sample_group: str | None = None
    """Metadata key: max_eval_instances then applies per group (e.g. per MMLU subject)."""
    max_eval_instances: int | None = None
    """Overrides the run-level max_eval_instances for this scenario."""
    instructions: str | None = None
    """Prompt header; {field} placeholders are filled from instance metadata."""
    input_noun: str | None = None
    """Label before each input in the prompt (e.g. "Question"); None: the input stands alone."""
    output_noun: str | None = None
    """Label before each answer (e.g. "Answer"); None: the answer follows a space."""
    max_tokens: int | None = None
    """Generation length limit."""
    stop: list[str] = field(default_factory=list)
    """Generation stop sequences."""
    num_train_trials: int = 1
    """Independent few-shot example sets; each is a `trial` in the artifacts."""
    calibration_prompt: str | None = None
    """Separate MC, calibrated: also score each option after this bare prompt and subtract."""
    partial: bool = False
    """Separate MC, fill-in-the-blank ("_" in the input): score the text after the blank."""
    max_malformed: int = 0
    """Raw rows that may be skipped as malformed (each reported with file:line); more fail the stage."""
    description: str | None = None
    """One line on what the scenario measures."""
    taxonomy: dict = field(default_factory=dict)
    """HELM taxonomy: task, domain (what), language, who, when."""
    license: str | None = None
    """Licence of the data as evaluated."""
    citation: str | None = None
    """How to cite the dataset."""
    perturbations: list[str] = field(default_factory=list)
    """Robustness/fairness perturbations (evaltrail.perturbations names): each makes a variant of
    every evaluated instance that goes through the same inference and is scored worst-case."""
    options: dict = field(default_factory=dict)
    """Loader-specific keys (e.g. mmlu's subjects), checked by the scenario's loader."""


@dataclass(frozen=True)
class ModelConfig:
    name: str
    """snake_case name: conf file, stage suffix and results file name."""
    backend: str
    """llama_cpp (embedded GGUF) | openai (any OpenAI-compatible server) | hf (local transformers directory)."""
    weights: dict | None = None
    """llama_cpp: sha256 of the whole file, license, and the parts it is assembled from."""
    n_ctx: int | None = None
    """llama_cpp: context window in tokens."""
    n_batch: int | None = None
    """llama_cpp: prompt tokens per decode call."""
    server: dict | None = None
    """openai: base_url, model, api_key_env, concurrency, timeout_s, max_retries (models.openai.ServerConfig)."""
    hf: dict | None = None
    """hf: path of a local transformers directory, dtype, max_length (models.hf.HFConfig)."""
    n_threads: int | None = None
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
    """Judge prompt with {instruction}, {first}, {second} (evaltrail.judge.pairwise.JudgePrompt)."""
    labels: dict
    """Verdict labels the judge may answer -> first / second / tie."""
    max_tokens: int
    """Generation budget of one verdict."""
    stop: list[str]
    """Stop sequences of a verdict."""
    method: str = "generate"
    """generate: the judge writes a label; logprob: each label's logprob is read (JudgePrompt.method)."""
    tie_margin: float = 0.0
    """logprob: a summed margin at most this far from 0 is a tie."""
    contestants: list[str] | None = None
    """Models whose answers battle; None: every model of the run."""
    max_answer_chars: int | None = None
    """Each answer is cut to this many characters in the judge prompt (fits a small judge's window)."""
    penalty_C: float | None = None
    """None: unpenalized Bradley-Terry MLE; a number: scikit-learn's inverse L2 strength C."""

    def models(self, run_models: list[str]) -> list[str]:
        return sorted(self.contestants if self.contestants is not None else run_models)

    def prompt(self):
        from .judge.pairwise import JudgePrompt
        return JudgePrompt(self.template, dict(self.labels), int(self.max_tokens), list(self.stop), self.method,
                           float(self.tie_margin))


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
    max_tokens: int = 3
    """generate: budget of a yes/no reply."""
    question_max_tokens: int = 32
    """Budget of the generated question."""
    embedding: str = "embedding"
    """Directory under data/raw/<scenario>/ holding the sentence-embedding model's pinned files."""

    def __post_init__(self):
        if self.method not in ("logprob", "generate"):
            raise EvaltrailError(f"params.yaml: rag.{self.scenario}.method: {self.method!r}; use logprob or generate")
        for key, fields in (("supported", ("{contexts}", "{statement}")), ("attributed", ("{contexts}", "{statement}")),
                            ("useful", ("{question}", "{reference}", "{context}")), ("question", ("{answer}",))):
            lacking = [f for f in fields if f not in getattr(self, key)]
            if lacking:
                raise EvaltrailError(f"params.yaml: rag.{self.scenario}.{key}: the prompt lacks {lacking[0]}")


@dataclass(frozen=True)
class RunConfig:
    seed: int
    max_eval_instances: int | None
    bootstrap_samples: int
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
    battle_scenarios: list[str] = field(default_factory=list)
    """Derived: the keys of `battle` (aggregate depends on this, not on the judge configs)."""
    rag_scenarios: list[str] = field(default_factory=list)
    """Derived: the keys of `rag`."""
    engine: Any = None
    """The pinned llama.cpp build (evaltrail.engine.EngineConfig); None where params.yaml has none."""


def build(cls, data: Any, where: str, **fixed):
    """Construct dataclass `cls` from a mapping, naming `where` on any bad key."""
    if not isinstance(data, dict):
        raise EvaltrailError(f"{where}: expected a mapping, got {type(data).__name__}")
    names = [f.name for f in dataclasses.fields(cls)]
    extra = {}
    if "options" in names:  # scenario: unknown keys go to the loader, which validates them
        extra = {k: v for k, v in data.items() if k not in names}
        data = {k: v for k, v in data.items() if k in names}
        data["options"] = extra
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise EvaltrailError(f"{where}.{unknown[0]}: unknown key; valid keys: {', '.join(n for n in names if n not in fixed)}")
    required = [f.name for f in dataclasses.fields(cls)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    missing = [n for n in required if n not in data and n not in fixed]
    if missing:
        raise EvaltrailError(f"{where}.{missing[0]}: missing required key (see conf/)")
    return cls(**fixed, **data)


def build_scenario(data: Any, where: str, name: str) -> ScenarioConfig:
    """A ScenarioConfig with its `files` source groups expanded to one source per file."""
    if isinstance(data, dict) and "sources" in data:
        data = {**data, "sources": expand(data["sources"], f"{where}.sources")}
    return build(ScenarioConfig, data, where, name=name)


def parse_params(raw: dict, source: str = PARAMS_FILE) -> RunConfig:
    raw = dict(raw)
    scen = {n: build_scenario(c, f"{source}: scenario.{n}", n)
            for n, c in (raw.pop("scenario", None) or {}).items()}
    for n, c in scen.items():
        if c.main_metric is not None and c.main_metric not in c.metrics:
            raise EvaltrailError(f"{source}: scenario.{n}.main_metric: {c.main_metric!r} is not among "
                                 f"its metrics ({', '.join(c.metrics)})")
    mods = {n: build(ModelConfig, c, f"{source}: model.{n}", name=n)
            for n, c in (raw.pop("model", None) or {}).items()}
    for n, m in mods.items():
        needed = {"llama_cpp": ("weights", "n_ctx", "n_batch"), "openai": ("server",), "hf": ("hf",)}.get(m.backend, ())
        lacking = [k for k in needed if getattr(m, k) is None]
        if lacking:
            raise EvaltrailError(f"{source}: model.{n}.{lacking[0]}: required by backend {m.backend} (see conf/model/)")
    battles = {n: build(BattleConfig, c, f"{source}: battle.{n}", scenario=n)
               for n, c in (raw.pop("battle", None) or {}).items()}
    for n, b in battles.items():
        where = f"{source}: battle.{n}"
        if n not in scen:
            raise EvaltrailError(f"{where}: battles need scenario {n!r} in the run; add it to the suite's defaults")
        if b.judge not in mods:
            raise EvaltrailError(f"{where}.judge: {b.judge!r} is not a model of the run; add it to the suite's "
                                 f"defaults (valid: {', '.join(sorted(mods))})")
        contestants = b.models(list(mods))
        if unknown := sorted(set(contestants) - set(mods)):
            raise EvaltrailError(f"{where}.contestants: {unknown[0]!r} is not a model of the run "
                                 f"(valid: {', '.join(sorted(mods))})")
        if len(set(contestants)) < 2:
            raise EvaltrailError(f"{where}.contestants: a battle needs at least two models, got {contestants}")
        try:
            b.prompt()
        except EvaltrailError as exc:
            raise EvaltrailError(f"{where}.template/labels: {exc} (see conf/judge/)") from None
    rag = {n: build(RagConfig, c, f"{source}: rag.{n}", scenario=n) for n, c in (raw.pop("rag", None) or {}).items()}
    for n, r in rag.items():
        if n not in scen:
            raise EvaltrailError(f"{source}: rag.{n}: RAG metrics need scenario {n!r} in the run; add it to the suite")
        if r.judge not in mods:
            raise EvaltrailError(f"{source}: rag.{n}.judge: {r.judge!r} is not a model of the run; add it to the "
                                 f"suite's defaults (valid: {', '.join(sorted(mods))})")
    engine = raw.pop("engine", None)
    engine = None if engine is None else engine_config(engine, f"{source}: engine")
    return build(RunConfig, {**raw, "scenario": scen, "model": mods, "battle": battles, "rag": rag,
                             "engine": engine}, source)


def load_params(path: str | Path = PARAMS_FILE) -> RunConfig:
    path = Path(path)
    if not path.exists():
        raise EvaltrailError(f"{path}: not found; compose it with `dvc exp run` (or run from the repo root)")
    with open(path, encoding="utf-8") as f:
        try:
            raw = yaml.safe_load(f) or {}
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
            raise EvaltrailError(f"{path}: not valid YAML{where}: {getattr(exc, 'problem', None) or exc}; fix it, or "
                                 f"recompose it from conf/ with `dvc exp run`") from None
    if not isinstance(raw, dict):
        raise EvaltrailError(f"{path}: expected a mapping at the top, got {type(raw).__name__}; recompose it with `dvc exp run`")
    return parse_params(raw, str(path))


def scenario_config(run: RunConfig, name: str) -> ScenarioConfig:
    if name not in run.scenario:
        raise EvaltrailError(
            f"unknown scenario {name!r} in params.yaml; valid: {', '.join(sorted(run.scenario)) or '(none)'}")
    return run.scenario[name]


def model_config(run: RunConfig, name: str) -> ModelConfig:
    if name not in run.model:
        raise EvaltrailError(
            f"unknown model {name!r} in params.yaml; valid: {', '.join(sorted(run.model)) or '(none)'}")
    return run.model[name]


def scenario_from_conf(name: str, conf_dir: str | Path = "conf") -> ScenarioConfig:
    """One scenario's config composed by Hydra from conf/scenario/<name>.yaml alone (no suite),
    exactly as `dvc exp run` would put it in params.yaml; for checks and tests."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf

    conf_dir = Path(conf_dir).resolve()
    try:
        with initialize_config_dir(str(conf_dir), version_base=None):
            cfg = compose("config", overrides=["~suite", f"+scenario@scenario.{name}={name}"])
    except HydraException as exc:
        raise EvaltrailError(f"{conf_dir}/scenario/{name}.yaml: {str(exc).splitlines()[0]}; valid: "
                             + ", ".join(sorted(p.stem for p in (conf_dir / "scenario").glob("*.yaml")))) from None
    raw = OmegaConf.to_container(cfg.scenario[name], resolve=True)
    return build_scenario(raw, f"conf/scenario/{name}.yaml", name)


def run_from_conf(overrides: list[str] | tuple[str, ...] = (), conf_dir: str | Path = "conf") -> RunConfig:
    """The run config Hydra composes from conf/ with `overrides` (e.g. "suite=core"), exactly as
    `dvc exp run -S ...` would write params.yaml; for checks, tests and benchmarks."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(str(Path(conf_dir).resolve()), version_base=None):
        cfg = compose("config", overrides=list(overrides))
    return parse_params(OmegaConf.to_container(cfg, resolve=True), f"{conf_dir} composed with {list(overrides)}")


def resources_from_conf(conf_dir: str | Path = "conf") -> dict:
    """The run-level pinned word lists (`resources` in conf/config.yaml), for checks and tests."""
    with open(Path(conf_dir) / "config.yaml", encoding="utf-8") as f:
        return dict((yaml.safe_load(f) or {}).get("resources") or {})
