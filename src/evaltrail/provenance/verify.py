"""`evaltrail verify`: recompute a seeded sample of a committed cell and compare it with the committed answers.

Under the identity the committed completions were computed with (weights, llama.cpp engine,
settings), every deterministic field must come out bit for bit the same (DESIGN.md: deterministic
outputs vs measurements). Under another identity (another engine build) bits may legitimately
differ, so verify measures agreement instead: identical predictions, and the main metric's paired
difference with a bootstrap CI. Recomputation runs in a scratch request cache: an answer served
from the user's cache would verify nothing, and a verification leaves that cache untouched.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from ..config import ModelConfig, RunConfig, ScenarioConfig, model_config, scenario_config
from ..errors import EvaltrailError
from ..hashing import canonical_json
from ..paths import completions_path, model_dir, model_info_path, prompts_path
from ..schema import COMPLETIONS_SCHEMA
from .lock import dvc_md5, load_lock, recorded_md5

IDENTITY_KEY = b"evaltrail.identity"
"""Parquet schema metadata key under which infer records the model identity (canonical JSON)."""

LOGPROB_TOL = 1e-6
"""Agreement mode: a loglikelihood counts as agreeing when within this many nats."""

COMPARED = tuple(n for n in COMPLETIONS_SCHEMA.names if n not in ("request_id", "runtime_s", "num_evaluated_tokens"))
"""The deterministic completion fields. runtime_s measures the machine; num_evaluated_tokens
depends on which KV prefixes earlier requests left behind."""


@dataclass(frozen=True)
class Mismatch:
    request_id: str
    """The first sampled request (in id order) whose recomputation differs."""
    field: str
    """The first differing field; for a list, its first differing element, e.g. `token_logprobs[3]`."""
    committed: Any
    """The committed value."""
    local: Any
    """The value recomputed here."""


@dataclass(frozen=True)
class Agreement:
    """How far answers computed under another identity agree with the committed ones, over the
    instances of the sampled requests (all of their requests recomputed, so each can be scored)."""

    instances: int
    """Instances scored."""
    predictions: int
    """Predictions compared: each generation's text, and each (instance, trial)'s chosen option
    (highest logprob) among its loglikelihood requests."""
    same_predictions: int
    """Predictions identical on both sides."""
    logprobs: int
    """Requests with a logprob."""
    close_logprobs: int
    """Of those, logprobs within LOGPROB_TOL of the committed one."""
    metric: str | None
    """The scenario's main metric; None when it has no per-instance values (a corpus metric)."""
    delta: float | None
    """Mean over instances of the main metric, local minus committed."""
    ci_low: float | None
    """Paired-bootstrap 95% CI of `delta` (seeded)."""
    ci_high: float | None

    @property
    def reproduced(self) -> bool | None:
        """Whether the CI includes 0; None without a per-instance main metric."""
        return None if self.delta is None else self.ci_low <= 0.0 <= self.ci_high


@dataclass(frozen=True)
class Verification:
    scenario: str
    model: str
    seed: int
    """Seed of the sample (and of the bootstrap in agreement mode)."""
    population: int
    """Distinct request contents in the cell."""
    sample: tuple[str, ...]
    """The sampled request ids, sorted."""
    committed_identity: dict | None
    """The identity recorded in the committed Parquet; None when it records none (unknown)."""
    local_identity: dict
    """This machine's identity of the model (weights, engine, settings)."""
    identity_diff: tuple[str, ...]
    """Identity fields (dotted, nested ones flattened) that differ; empty: bit-identity is expected."""
    identical: int
    """Sampled requests whose deterministic fields are all bit-identical."""
    first_mismatch: Mismatch | None
    """The first differing request, field and values."""
    agreement: Agreement | None
    """Agreement statistics when the identities differ."""
    checked_at: str
    """UTC time of the verification (ISO 8601)."""

    @property
    def mode(self) -> str:
        return "agreement" if self.identity_diff else "identical"

    @property
    def ok(self) -> bool:
        if self.agreement is not None:
            return self.agreement.reproduced is not False
        return self.identical == len(self.sample)

    def lines(self) -> list[str]:
        cell, n = f"{self.scenario} x {self.model}", len(self.sample)
        out = []
        if self.committed_identity is None:
            out.append(
                f"note: {completions_path(self.scenario, self.model)} records no model identity: the committed "
                f"identity is unknown; comparing bit for bit with this machine's"
            )
        if self.identity_diff:
            a, b = _flat(self.committed_identity or {}), _flat(self.local_identity)
            out.append(
                "identity differs from the committed one: "
                + ", ".join(f"{k} (committed {_shown(a.get(k))}, local {_shown(b.get(k))})" for k in self.identity_diff)
                + "; measuring agreement, not bit-identity"
            )
        first = self.first_mismatch
        if (ag := self.agreement) is None:
            out.append(
                f"verify {cell}: {n}/{n} identical"
                if first is None
                else f"verify {cell}: {n - self.identical}/{n} differ; first: request {first.request_id}: "
                f"{first.field}: committed {first.committed!r}, local {first.local!r}"
            )
        else:
            out.append(
                f"verify {cell}: {self.identical}/{n} sampled requests bit-identical (not required across identities)"
            )
            out.append(
                f"agreement over {ag.instances} instances: {ag.same_predictions}/{ag.predictions} predictions "
                f"identical, {ag.close_logprobs}/{ag.logprobs} logprobs within {LOGPROB_TOL:g}"
            )
            if ag.delta is None:
                out.append("main metric: none with per-instance values; no verdict beyond agreement")
            else:
                verdict = "reproduced within noise" if ag.reproduced else "NOT reproduced within noise"
                out.append(
                    f"{ag.metric} delta (local - committed): {ag.delta:+.4f} [95% CI {ag.ci_low:+.4f}, "
                    f"{ag.ci_high:+.4f}]: {verdict}"
                )
        return out

    def record(self) -> dict:
        """What results/verify/<scenario>/<model>.json holds (the sample itself follows from the seed)."""
        out = dataclasses.asdict(self)
        out.pop("sample")
        out.update(
            mode=self.mode,
            ok=self.ok,
            sample_size=len(self.sample),
            reproduced=None if self.agreement is None else self.agreement.reproduced,
        )
        return out


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        out.update(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def _shown(v: Any) -> str:
    return "absent" if v is None else repr(v)


def committed_identity(path: Path) -> dict | None:
    raw = (pq.read_schema(path).metadata or {}).get(IDENTITY_KEY)
    return None if raw is None else json.loads(raw)


def identity_diff(committed: dict, local: dict) -> tuple[str, ...]:
    a, b = _flat(committed), _flat(local)
    return tuple(sorted(k for k in a.keys() | b.keys() if k not in a or k not in b or a[k] != b[k]))


def distinct_requests(prompts: pd.DataFrame) -> list[str]:
    """One request id per distinct request content (what the cache keys on), its smallest, sorted:
    independent of row order."""
    from ..backends.infer import request_contents

    reps: dict[str, str] = {}
    for rid, content in zip(prompts["request_id"], request_contents(prompts)):
        key = canonical_json(content)
        reps[key] = min(rid, reps.get(key, rid))
    return sorted(reps.values())


def draw(ids: list[str], size: int | None, seed: int) -> list[str]:
    """A seeded sample of sorted ids with numpy's default_rng(seed), sorted; size None: all."""
    if size is None or size >= len(ids):
        return list(ids)
    return sorted(ids[i] for i in np.random.default_rng(seed).choice(len(ids), size=size, replace=False))


def recompute(prompts: pd.DataFrame, cfg: ModelConfig, model: str, info: dict) -> dict[str, dict]:
    """Completions of `prompts` computed now, in a scratch request cache; by request id."""
    from ..backends import model_identity, open_model
    from ..backends.cache import RequestCache
    from ..backends.infer import run_requests

    with tempfile.TemporaryDirectory(prefix="evaltrail-verify-") as tmp:
        cache = RequestCache(Path(tmp) / "requests.sqlite")
        try:
            table, _ = run_requests(
                prompts,
                model_identity(cfg, info),
                cache,
                lambda: open_model(cfg, model_dir(model), info),
                f"verify {model}",
            )
        finally:
            cache.close()
    return {r["request_id"]: r for r in table.to_pylist()}


def _same(a: Any, b: Any) -> bool:
    # repr of a float64 is its shortest round-trip string: equal repr is equal bits (and -0.0 != 0.0)
    return repr(a) == repr(b)


def first_difference(request_id: str, committed: dict, local: dict) -> Mismatch | None:
    for f in COMPARED:
        a, b = committed.get(f), local.get(f)
        if _same(a, b):
            continue
        if isinstance(a, list) and isinstance(b, list):  # name the element, not the whole list
            i = next((i for i, (x, y) in enumerate(zip(a, b)) if not _same(x, y)), None)
            return (
                Mismatch(request_id, f"len({f})", len(a), len(b))
                if i is None
                else Mismatch(request_id, f"{f}[{i}]", a[i], b[i])
            )
        return Mismatch(request_id, f, a, b)
    return None


def _predictions(frame: pd.DataFrame) -> pd.Series:
    """Each generation's text (by request id) and each (instance, trial)'s highest-logprob option."""
    from ..metrics.scoring import choice_rows

    gen = frame[frame["method"] == "generate"].set_index("request_id")["text"]
    rows = choice_rows(frame)
    picks = rows.loc[rows.groupby(["instance_id", "trial"])["logprob"].idxmax()]
    chosen = pd.Series(picks["choice_index"].to_numpy(), index=picks["instance_id"] + "/" + picks["trial"].astype(str))
    return pd.concat([gen.astype(object), chosen.astype(object)])


def _main_metric(frame: pd.DataFrame, cfg: ScenarioConfig) -> pd.Series | None:
    """Per instance (trials averaged) the main metric, scored by the pipeline's own scoring code."""
    from ..adapters import get_adapter
    from ..metrics import PER_INSTANCE, get_metric
    from ..metrics.scoring import score_frame

    if cfg.main_metric is None or get_metric(cfg.main_metric).kind not in PER_INSTANCE:
        return None
    scores = score_frame(frame, dataclasses.replace(cfg, metrics=[cfg.main_metric]), get_adapter(cfg.method))
    return scores[scores["metric"] == cfg.main_metric].groupby("instance_id")["value"].mean()


def agreement(
    prompts: pd.DataFrame,
    committed: dict[str, dict],
    local: dict[str, dict],
    cfg: ScenarioConfig,
    samples: int,
    seed: int,
) -> Agreement:
    """Committed vs local answers to `prompts` (whole instances), the main metric paired per instance."""
    from ..metrics.scoring import join
    from ..metrics.stats import mean_ci

    frames = [join(prompts, pd.DataFrame([side[r] for r in prompts["request_id"]])) for side in (committed, local)]
    before, after = (_predictions(f) for f in frames)
    same = sum(_same(a, b) for a, b in zip(before, after.reindex(before.index)))
    lps = [
        (committed[r]["logprob"], local[r]["logprob"])
        for r in prompts["request_id"]
        if committed[r]["logprob"] is not None and local[r]["logprob"] is not None
    ]
    close = sum(abs(a - b) <= LOGPROB_TOL for a, b in lps)
    metric = [_main_metric(f, cfg) for f in frames]
    stats = {"mean": None, "ci_low": None, "ci_high": None}
    if metric[0] is not None:
        diff = (metric[1] - metric[0].reindex(metric[1].index)).dropna()
        stats = mean_ci(diff.to_numpy(), samples, seed)  # a bootstrap of paired differences
    return Agreement(
        int(prompts["instance_id"].nunique()),
        len(before),
        int(same),
        len(lps),
        int(close),
        None if metric[0] is None else cfg.main_metric,
        stats["mean"],
        stats["ci_low"],
        stats["ci_high"],
    )


def _committed_path(scenario: str, model: str) -> Path:
    """The committed completions, refusing a local file that is not the one dvc.lock records."""
    path, stage = completions_path(scenario, model), f"infer@{scenario}-{model}"
    if not path.is_file():
        raise EvaltrailError(f"{path}: missing; fetch the committed completions with `dvc pull {stage}`")
    want = recorded_md5(load_lock(), stage, path)
    if want is not None and (md5 := dvc_md5(path)) != want:
        raise EvaltrailError(
            f"{path}: md5 {md5} is not the {want} dvc.lock records, so these are not the "
            f"committed answers; restore them with `dvc checkout {path}` (or `dvc pull {stage}`)"
        )
    return path


def verify(run: RunConfig, scenario: str, model: str, size: int | None, seed: int = 0) -> Verification:
    """Recompute `size` sampled requests of the cell (None: all) and compare them with the committed completions."""
    from ..backends import model_identity

    scfg, mcfg = scenario_config(run, scenario), model_config(run, model)
    path = _committed_path(scenario, model)
    for need in (prompts_path(scenario), model_info_path(model)):
        if not need.is_file():
            raise EvaltrailError(
                f"{need}: missing; run `dvc repro prepare@{scenario} fetch_model@{model}` (or `dvc pull`)"
            )
    prompts = pd.read_parquet(prompts_path(scenario))
    committed = {r["request_id"]: r for r in pq.read_table(path).to_pylist()}
    population = distinct_requests(prompts)
    ids = draw(population, size, seed)
    info = json.loads(model_info_path(model).read_text(encoding="utf-8"))
    theirs, ours = committed_identity(path), model_identity(mcfg, info)
    differs = identity_diff(theirs, ours) if theirs is not None else ()
    # agreement scores whole instances, so it recomputes every request of the sampled ones
    todo = prompts[
        prompts["instance_id"].isin(set(prompts.loc[prompts["request_id"].isin(ids), "instance_id"]))
        if differs
        else prompts["request_id"].isin(ids)
    ]
    if lacking := [r for r in todo["request_id"] if r not in committed]:
        raise EvaltrailError(
            f"{path}: no completion for request {lacking[0]} of {prompts_path(scenario)}: the prompts "
            f"changed since infer ran; `dvc status` says which"
        )
    local = recompute(todo, mcfg, model, info)
    mismatches = [m for r in ids if (m := first_difference(r, committed[r], local[r]))]
    return Verification(
        scenario,
        model,
        seed,
        len(population),
        tuple(ids),
        theirs,
        ours,
        differs,
        len(ids) - len(mismatches),
        mismatches[0] if mismatches else None,
        agreement(todo, committed, local, scfg, run.bootstrap_samples, seed) if differs else None,
        datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
