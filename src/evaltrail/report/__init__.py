"""Static HTML report: opens from disk (file://), no server, no network.

Layout of the output directory:
- index.html          run facts, leaderboard tables (sortable), charts, scenario links
- assets/report.css, assets/report.js
- data/<scenario>.js  one scenario's drill-down data, loaded on demand by a <script> tag (fetch()
                      of a file:// URL is blocked in Chromium, a script is not)

Same inputs give byte-identical files: sorted JSON keys, stable orders, no timestamps.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Iterator

from ..aggregate.leaderboard import judged, merged
from ..config import SHA256_OF, RunConfig
from ..errors import EvaltrailError
from ..paths import FAMILIES_JSON, LEADERBOARD_JSON, PLOTS, REPORT, battle_ratings_path, summary_path, verify_path
from .charts import charts
from .data import scenario_payload
from .html import ModelFacts, ScenarioFacts, index_html, verification_line
from .inputs import read_json_input, read_optional_json
from .tables import battle_tables, check_records, classifier_tables, family_tables, leaderboard_tables

REPORT_DIR = REPORT
ASSETS = ("report.css", "report.js")


@dataclass(frozen=True)
class Built:
    index: Path
    """The report's entry page."""
    files: dict[str, int]
    """Every file written (path relative to the report directory) -> size in bytes."""

    @property
    def total_bytes(self) -> int:
        return sum(self.files.values())


@contextmanager
def atomic_dir(path: Path) -> Iterator[Path]:
    """Yield an empty temp dir beside `path`; on success it replaces `path`, on error it is
    deleted and `path` is left as it was. (Two renames: a reader may briefly see no directory.)"""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    tmp.chmod(0o755)  # mkdtemp makes it owner-only; the report is meant to be read
    old = tmp.with_suffix(".old")
    try:
        yield tmp
        if path.exists():
            os.replace(path, old)
        os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)


def data_js(scenario: str, payload: dict) -> str:
    """A script registering the payload; U+2028/9 escaped for older JS parsers."""
    body = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    body = body.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return (
        "window.EVALTRAIL_DATA = window.EVALTRAIL_DATA || {};\n"
        f"window.EVALTRAIL_DATA[{json.dumps(scenario)}] = {body};\n"
    )


def _facts(run: RunConfig) -> tuple[list[ModelFacts], list[ScenarioFacts]]:
    """Weights hashes and instance counts as the score summaries record them."""
    summaries = {
        (s, m): read_json_input(summary_path(s, m), f"run `dvc repro score@{s}-{m}`")
        for s in run.scenarios
        for m in run.models
    }
    models = [
        ModelFacts(
            m,
            sorted({summaries[(s, m)].get("model_sha256") for s in run.scenarios} - {None}),
            ((run.model[m].weights or {}).get("license") if m in run.model else None),
            SHA256_OF[run.model[m].backend] if m in run.model else "unknown",
        )
        for m in run.models
    ]
    scenarios = []
    for s in run.scenarios:
        cfg, first = run.scenario[s], summaries.get((s, run.models[0])) if run.models else None
        scenarios.append(
            ScenarioFacts(
                s,
                cfg.description,
                cfg.method,
                cfg.main_metric,
                (first or {}).get("n_instances"),
                (first or {}).get("n_variants"),
            )
        )
    return models, scenarios


def _verification(path: Path) -> str:
    try:
        return verification_line(read_json_input(path, ""))
    except (KeyError, TypeError, AttributeError):
        raise EvaltrailError(f"{path}: not an `evaltrail verify` record; re-run evaltrail verify") from None


def build_report(run: RunConfig, out: str | Path = REPORT_DIR) -> Built:
    """Build the report from the pipeline's outputs (paths relative to the working directory)
    into `out`, replacing it only once every file is written."""
    records = check_records(read_json_input(LEADERBOARD_JSON, "run `dvc repro aggregate`"), LEADERBOARD_JSON)
    families = read_optional_json(FAMILIES_JSON)
    win_rates = family_tables(families, FAMILIES_JSON) if families is not None else []
    models, scenarios = _facts(run)
    battles = [
        t
        for b in sorted(run.battle_scenarios)
        for t in battle_tables(b, read_json_input(battle_ratings_path(b), f"run `dvc repro battle@{b}`"))
    ]
    refusal = judged(run, [], run.refusal_scenarios)  # the judge classifier's check, beside the string match's
    classifiers = [
        t
        for s in run.scenarios
        for m in run.models[:1]  # the check is about the classifier: the same in every model's summary
        if "classifier_checks" in (summary := read_json_input(summary_path(s, m), f"run `dvc repro score@{s}-{m}`"))
        for t in classifier_tables(s, merged(summary, refusal.get((s, m), {"metrics": {}}))["classifier_checks"])
    ]
    verified = [
        (s, m, _verification(verify_path(s, m)))
        for s in run.scenarios
        for m in run.models
        if verify_path(s, m).is_file()
    ]
    page = index_html(
        models,
        scenarios,
        leaderboard_tables(records, run.models),
        win_rates,
        charts(PLOTS, run.models),
        battles,
        verified,
        classifiers,
    )
    files = {"index.html": page}
    files.update(
        {f"assets/{a}": resources.files(__package__).joinpath("assets", a).read_text(encoding="utf-8") for a in ASSETS}
    )
    out = Path(out)
    sizes: dict[str, int] = {}
    with atomic_dir(out) as tmp:

        def write(rel: str, text: str) -> None:
            dest = tmp / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            data = text.encode("utf-8")
            dest.write_bytes(data)
            sizes[rel] = len(data)

        for rel, text in files.items():
            write(rel, text)
        for s in run.scenarios:  # one at a time: only one scenario's data in memory
            write(f"data/{s}.js", data_js(s, scenario_payload(run, s)))
    return Built(out / "index.html", dict(sorted(sizes.items())))
