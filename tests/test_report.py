"""The static report: built from a tiny but real set of pipeline outputs, checked in a real browser.

Inputs: two scenarios (joint multiple choice with a perturbation variant, separate multiple choice)
and two models, written with the pipeline's own schemas and prompt builders. The browser test
opens index.html from disk (file://) in Debian's Chromium through Playwright.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from evaltrail.adapters import multiple_choice_joint as joint
from evaltrail.aggregate.leaderboard import leaderboard
from evaltrail.config import load_params
from evaltrail.errors import EvaltrailError
from evaltrail.io import write_json, write_parquet, write_text
from evaltrail.paths import (
    LEADERBOARD_JSON,
    PARAMS_SLICES,
    completions_path,
    prompts_path,
    scores_path,
    sources_json,
    summary_path,
)
from evaltrail.report import build_report
from evaltrail.schema import COMPLETIONS_SCHEMA, SCORES_SCHEMA, Reference, make_instance, make_request, prompts_table
from evaltrail.stage_params import write_slices

from .conftest import ROOT

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
MODELS = ["alpha_model", "beta_model"]
SHA = {"alpha_model": "a" * 64, "beta_model": "b" * 64}
XSS = '<img src=x onerror="window.__pwned = 1">'  # must show as text, never run

PARAMS = {
    "seed": 0,
    "max_eval_instances": 10,
    "bootstrap_samples": 10,
    "scenarios": ["mmlu", "hellaswag"],
    "models": MODELS,
    "mlflow": {"experiment": "test"},
    "battle_scenarios": ["hellaswag"],  # ratings.json below stands in for a battle stage's output
    "scenario": {
        "mmlu": {
            "description": "Knowledge across subjects",
            "license": "MIT",
            "citation": "Hendrycks et al. (2021)",
            "taxonomy": {"task": "multiple choice QA", "language": "English"},
            "method": "multiple_choice_joint",
            "eval_split": "test",
            "train_split": "dev",
            "num_shots": 2,
            "instructions": "The following are multiple choice questions (with answers) about {subject_name}.",
            "metrics": ["exact_match", "prompt_tokens"],
            "main_metric": "exact_match",
            "perturbations": ["mild_mix"],
            "sources": [],
        },
        "hellaswag": {
            "description": "What happens next",
            "license": "MIT",
            "citation": "Zellers et al. (2019)",
            "taxonomy": {"task": "sentence completion"},
            "method": "multiple_choice_separate",
            "eval_split": "validation",
            "metrics": ["acc", "acc_norm"],
            "main_metric": "acc_norm",
            "sources": [],
        },
    },
    "model": {
        m: {
            "backend": "llama_cpp",
            "weights": {"sha256": SHA[m], "license": "Apache-2.0"},
            "n_ctx": 2048,
            "n_batch": 512,
        }
        for m in MODELS
    },
}


def _refs(options: list[str], gold: int) -> list[Reference]:
    return [Reference(t, i == gold) for i, t in enumerate(options)]


def _completion(rid: str, text: str | None, logprob: float, model: str) -> dict:
    return {
        "request_id": rid,
        "text": text,
        "logprob": logprob,
        "is_greedy": text is not None,
        "token_logprobs": [logprob],
        "num_prompt_tokens": 100,
        "num_output_tokens": 1,
        "num_evaluated_tokens": 100,
        "truncated_tokens": 0,
        "rendered_prompt": None,
        "runtime_s": 0.5,
        "model_sha256": SHA[model],
    }


def _score_rows(values: dict[str, dict[str, float]], variants: dict[str, tuple[str, str]]) -> list[dict]:
    """values: metric -> instance_id -> value; variants: variant id -> (perturbation, original id)."""
    return [
        {
            "instance_id": iid,
            "metric": metric,
            "value": v,
            "perturbation": variants.get(iid, (None,))[0],
            "trial": 0,
            "original_id": variants.get(iid, (None, iid))[1],
        }
        for metric, per in sorted(values.items())
        for iid, v in sorted(per.items())
    ]


def _summary(scenario: str, model: str, main: str, rows: list[dict], n_variants: int) -> dict:
    metrics = {}
    for name in sorted({r["metric"] for r in rows}):
        vals = [r["value"] for r in rows if r["metric"] == name and r["perturbation"] is None]
        mean = sum(vals) / len(vals)
        fam = "robustness" if "/" in name else ("efficiency" if name == "prompt_tokens" else "accuracy")
        metrics[name] = {
            "mean": mean,
            "ci_low": max(mean - 0.2, 0),
            "ci_high": mean + 0.2,
            "n": len(vals),
            "family": fam,
            "higher_is_better": None if name == "prompt_tokens" else True,
        }
    return {
        "scenario": scenario,
        "model": model,
        "main_metric": main,
        "metrics": metrics,
        "model_sha256": SHA[model],
        "n_instances": len({r["original_id"] for r in rows}),
        "n_variants": n_variants,
        "n_trials": 1,
        "scorers": {},
    }


def _mmlu(cfg) -> dict:
    """Joint multiple choice: 3 originals (2-shot, so a shared few-shot context) and a variant of q1."""
    meta = {"subject": "physics", "subject_name": "physics"}
    shots = [
        make_instance(
            "dev",
            "Which force keeps planets in orbit around the Sun in our solar system?",
            _refs(["Friction", "Gravity", "Magnetism", "Tension"], 1),
            meta,
        ),
        make_instance(
            "dev",
            "What is the SI unit of electric charge, as defined in the metric system?",
            _refs(["Coulomb", "Volt", "Ampere", "Ohm"], 0),
            meta,
        ),
    ]
    qs = [
        make_instance(
            "test",
            "Which particle carries a negative charge?",
            _refs(["Proton", "Neutron", "Electron", "Quark"], 2),
            meta,
        ),
        make_instance(
            "test",
            f"What is the speed of light in vacuum? {XSS}",
            _refs(["3e8 m/s", "3e5 m/s", "340 m/s", "1 m/s"], 0),
            meta,
        ),
        make_instance(
            "test", "Which quantity is measured in joules?", _refs(["Power", "Energy", "Mass", "Time"], 1), meta
        ),
    ]
    var = dataclasses.replace(
        make_instance(
            "test",
            "which partcle carries a  negative charge?",
            list(qs[0].references),
            {**meta, "original_id": qs[0].instance_id},
        ),
        perturbation="mild_mix",
    )
    pairs = []
    for inst in qs + [var]:
        prompt = joint.build_prompt(cfg, inst, shots)
        ids = tuple(s.instance_id for s in shots)
        pairs.append(
            (inst, make_request(inst.instance_id, 0, "generate", prompt, max_tokens=1, stop=("\n",), few_shot_ids=ids))
        )
        if inst.perturbation is None:
            pairs += [
                (
                    inst,
                    make_request(
                        inst.instance_id,
                        0,
                        "loglikelihood",
                        prompt,
                        continuation=" " + joint.LETTERS[i],
                        choice_index=i,
                        few_shot_ids=ids,
                    ),
                )
                for i in range(4)
            ]
    answers = {"alpha_model": [" C", " B", " B", " A"], "beta_model": [" A", " A", " D", " C"]}
    out = {
        "pairs": pairs,
        "ids": [q.instance_id for q in qs],
        "variant": var.instance_id,
        "completions": {},
        "scores": {},
    }
    for m in MODELS:
        gen = dict(zip([q.instance_id for q in qs] + [var.instance_id], answers[m]))
        out["completions"][m] = [
            _completion(
                r.request_id,
                gen[r.instance_id] if r.method == "generate" else None,
                -0.5 if r.method == "generate" else -1.0 - (r.choice_index + len(m)) % 4 * 0.5,
                m,
            )
            for _, r in pairs
        ]
        em = {
            iid: float(
                ans.strip() == joint.LETTERS[next(i for i, r in enumerate(qs[0].references) if r.correct)]
                if iid in (qs[0].instance_id, var.instance_id)
                else ans.strip() == joint.LETTERS[[q for q in qs if q.instance_id == iid][0].gold_indices[0]]
            )
            for iid, ans in gen.items()
        }
        worst = {
            qs[0].instance_id: min(em[qs[0].instance_id], em[var.instance_id]),
            qs[1].instance_id: em[qs[1].instance_id],
            qs[2].instance_id: em[qs[2].instance_id],
        }
        out["scores"][m] = _score_rows(
            {"exact_match": em, "exact_match/mild_mix": worst, "prompt_tokens": {iid: 100.0 for iid in gen}},
            {var.instance_id: ("mild_mix", qs[0].instance_id)},
        )
    return out


def _hellaswag() -> dict:
    """Separate multiple choice: 2 instances x 3 options, one loglikelihood request per option."""
    qs = [
        make_instance(
            "validation",
            "A man pours water into a glass. He",
            _refs(["drinks it.", "eats the glass.", "flies away."], 0),
        ),
        make_instance(
            "validation", "The cat sees a mouse. The cat", _refs(["sings opera.", "chases it.", "files taxes."], 1)
        ),
    ]
    pairs = [
        (q, make_request(q.instance_id, 0, "loglikelihood", q.input, continuation=" " + c, choice_index=i))
        for q in qs
        for i, c in enumerate(q.choices)
    ]
    # alpha: right on both; beta: right on the first only. One option dominates, so every rule agrees.
    best = {"alpha_model": [0, 1], "beta_model": [0, 2]}
    out = {"pairs": pairs, "ids": [q.instance_id for q in qs], "completions": {}, "scores": {}}
    for m in MODELS:
        pick = dict(zip([q.instance_id for q in qs], best[m]))
        out["completions"][m] = [
            _completion(r.request_id, None, -1.0 if r.choice_index == pick[r.instance_id] else -40.0, m)
            for _, r in pairs
        ]
        acc = {q.instance_id: float(q.references[pick[q.instance_id]].correct) for q in qs}
        out["scores"][m] = _score_rows({"acc": acc, "acc_norm": acc}, {})
    return out


def make_inputs(root: Path) -> dict:
    """Write params.yaml and every input the report reads under `root`; returns what was made."""
    with contextlib.chdir(root):
        write_text("params.yaml", yaml.safe_dump(PARAMS, sort_keys=False))
        run = load_params()
        write_slices(PARAMS, PARAMS_SLICES)  # what the configure stage writes: the report stage reads its slice
        made = {"mmlu": _mmlu(run.scenario["mmlu"]), "hellaswag": _hellaswag()}
        summaries = {}
        for s, d in made.items():
            write_parquet(prompts_path(s), prompts_table(d["pairs"]))
            write_json(
                sources_json(s),
                [
                    {
                        "file": f"{s}.arrow",
                        "kind": "pypi",
                        "package": "pkg",
                        "version": "1.0",
                        "path": f"data/{s}.arrow",
                        "sha256": "5" * 64,
                        "bytes": 123,
                        "license": "MIT",
                    }
                ],
            )
            for m in MODELS:
                write_parquet(
                    completions_path(s, m), pa.Table.from_pylist(d["completions"][m], schema=COMPLETIONS_SCHEMA)
                )
                write_parquet(scores_path(s, m), pa.Table.from_pylist(d["scores"][m], schema=SCORES_SCHEMA))
                summaries[(s, m)] = _summary(s, m, run.scenario[s].main_metric, d["scores"][m], 1 if s == "mmlu" else 0)
                write_json(summary_path(s, m), summaries[(s, m)])
        write_json(LEADERBOARD_JSON, leaderboard(summaries).to_dict(orient="records"))
        write_json(
            "results/leaderboard_families.json",
            [
                {
                    "family": "accuracy",
                    "columns": ["hellaswag: acc_norm", "mmlu: exact_match"],
                    "rows": [
                        {
                            "model": "alpha_model",
                            "mean_win_rate": 1.0,
                            "cells": {
                                "hellaswag: acc_norm": {"mean": 1.0, "ci_low": 0.8, "ci_high": 1.0, "n": 2},
                                "mmlu: exact_match": {"mean": 2 / 3, "ci_low": 0.4, "ci_high": 0.9, "n": 3},
                            },
                        },
                        {
                            "model": "beta_model",
                            "mean_win_rate": 0.0,
                            "cells": {
                                "hellaswag: acc_norm": {"mean": 0.5, "ci_low": 0.3, "ci_high": 0.7, "n": 2},
                                "mmlu: exact_match": None,
                            },
                        },
                    ],
                }
            ],
        )
        write_json(
            Path("results/battles/hellaswag/ratings.json"),
            {
                "method": "generate",
                "judge": "alpha_model",
                "agreement": 0.75,
                "ratings": [
                    {
                        "model": "beta_model",
                        "rating": 950.0,
                        "ci_low": 900.0,
                        "ci_high": 1001.0,
                        "rank": 1,
                        "battles": 4,
                    },
                    {
                        "model": "alpha_model",
                        "rating": 1050.0,
                        "ci_low": 999.0,
                        "ci_high": 1100.0,
                        "rank": 1,
                        "battles": 4,
                    },
                ],
                "win_rate": {
                    "alpha_model": {"alpha_model": None, "beta_model": 0.625},
                    "beta_model": {"alpha_model": 0.375, "beta_model": None},
                },
            },
        )
        plots = Path("results/plots")
        write_text(
            plots / "accuracy_vs_tokens.csv",
            "model,scenario,metric,accuracy,tokens_per_instance\n"
            "alpha_model,mmlu,exact_match,0.667,120.5\nbeta_model,mmlu,exact_match,0.333,80.0\n"
            "alpha_model,hellaswag,acc_norm,1.0,150.0\nbeta_model,hellaswag,acc_norm,0.5,95.0\n",
        )
        write_text(
            plots / "reliability.csv",
            "model,scenario,bin,confidence,accuracy,n\n"
            "alpha_model,mmlu,0,0.3,0.5,2\nalpha_model,mmlu,1,0.8,1.0,1\nbeta_model,mmlu,0,0.4,0.0,2\n",
        )
        write_text(
            plots / "mmlu_subjects.csv",
            "model,subject,accuracy,n\nalpha_model,physics,0.667,3\nbeta_model,physics,0.333,3\n",
        )
    return made


@contextlib.contextmanager
def _built(root: Path, out: str = "results/report"):
    with contextlib.chdir(root):
        yield build_report(load_params(), out)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("run")
    made = make_inputs(root)
    with _built(root) as built:
        return (root / built.index), made


# ---- without a browser -------------------------------------------------------------------------


def test_two_builds_are_byte_identical(tmp_path):
    make_inputs(tmp_path)
    with _built(tmp_path, "a") as first, _built(tmp_path, "b") as second:
        assert first.files == second.files
    names = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert [str(n) for n in names] == sorted(first.files) and "data/mmlu.js" in first.files
    for n in names:
        assert (tmp_path / "a" / n).read_bytes() == (tmp_path / "b" / n).read_bytes(), n


def test_missing_input_names_the_file_and_keeps_the_previous_report(tmp_path):
    make_inputs(tmp_path)
    with _built(tmp_path):
        pass
    before = {p: p.read_bytes() for p in (tmp_path / "results/report").rglob("*") if p.is_file()}
    (tmp_path / "results/scores/hellaswag/beta_model.parquet").unlink()
    with pytest.raises(EvaltrailError, match=r"results/scores/hellaswag/beta_model\.parquet: missing"):
        with _built(tmp_path):
            pass
    after = {p: p.read_bytes() for p in (tmp_path / "results/report").rglob("*") if p.is_file()}
    assert after == before
    assert sorted(p.name for p in (tmp_path / "results").iterdir() if p.name.startswith(".report")) == []


def test_payload_shares_the_few_shot_context_and_groups_variants(report):
    index, made = report
    text = (index.parent / "data/mmlu.js").read_text(encoding="utf-8")
    payload = json.loads(text.split(" = ", 2)[-1].rstrip(";\n"))
    assert len(payload["contexts"]) == 1  # the 2-shot prefix, stored once for all four prompts
    first = payload["groups"][0]
    assert [i.get("perturbation") for i in first["items"]] == [None, "mild_mix"]
    assert first["original_id"] == made["mmlu"]["ids"][0] == first["items"][0]["id"]
    full = {r.request_id: r.prompt for _, r in made["mmlu"]["pairs"] if r.method == "generate"}
    assert payload["contexts"][0] + first["items"][0]["prompt"] in full.values()  # exactly as sent


def test_stage_cli_reports_a_missing_input_in_one_line(tmp_path):
    make_inputs(tmp_path)
    (tmp_path / "results/leaderboard.json").unlink()
    proc = subprocess.run(
        [sys.executable, str(ROOT / "stages/report.py")], cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == ["error: results/leaderboard.json: missing; run `dvc repro aggregate`"]


# ---- in Chromium -------------------------------------------------------------------------------


def _require_browser():
    """Playwright and /usr/bin/chromium, or skip; under CI their absence is a failure."""
    missing = [] if Path(CHROMIUM).exists() else [f"{CHROMIUM} (apt install chromium)"]
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("the playwright Python package (pip install playwright; no `playwright install`)")
    if missing:
        msg = "browser test needs " + " and ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)


@pytest.fixture(scope="module")
def page(report):
    _require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        pg = browser.new_page(viewport={"width": 1400, "height": 1000})
        pg.errors = []
        pg.on("console", lambda m: pg.errors.append(m.text) if m.type == "error" else None)
        pg.on("pageerror", lambda e: pg.errors.append(str(e)))
        pg.on("request", lambda r: None if r.url.startswith("file://") else pg.errors.append(f"network: {r.url}"))
        pg.goto(report[0].as_uri())
        yield pg
        browser.close()


def _column(pg, table: str) -> list[str]:
    return pg.locator(f"{table} tbody th").all_text_contents()


def test_leaderboard_tables_render_and_sort(page, report):
    main = page.locator("#table-main")
    assert _column(page, "#table-main") == MODELS
    alpha = main.locator("tbody tr").first.locator("td")
    assert alpha.nth(1).text_content() == "0.667[0.467, 0.867]"  # mmlu exact_match: mean, then the CI
    assert alpha.nth(1).get_attribute("title") == "n=3"
    assert page.locator("#table-family-robustness thead").text_content().count("exact_match/mild_mix") == 1
    assert page.locator("#table-winrate-accuracy tbody tr").nth(1).locator("td").nth(2).text_content() == "—"
    mmlu_col = main.locator("thead th[data-col='2']")
    assert mmlu_col.text_content().startswith("exact_match")
    mmlu_col.click()  # numbers: highest first
    assert _column(page, "#table-main") == ["alpha_model", "beta_model"]
    assert mmlu_col.get_attribute("aria-sort") == "descending"
    mmlu_col.click()
    assert _column(page, "#table-main") == ["beta_model", "alpha_model"]
    assert page.locator("#plot-accuracy_vs_tokens svg circle, #plot-accuracy_vs_tokens svg rect").count() >= 4
    assert page.locator("#plot-reliability-mmlu line.diagonal").count() >= 1
    assert page.locator("#plot-mmlu_subjects rect.bar").count() == 2
    assert page.locator("#models").text_content().count(SHA["alpha_model"]) == 1
    assert page.errors == []


def test_battle_ratings_render_with_their_ci_and_sort(page, report):
    table = "#table-battle-hellaswag"
    assert "agreement between orders 75.0%" in page.locator("#battles ~ figure").first.text_content()
    assert _column(page, table) == ["beta_model", "alpha_model"]  # as ratings.json lists them
    assert page.locator(f"{table} tbody tr").nth(1).locator("td").first.text_content() == "1050.0[999.0, 1100.0]"
    page.locator(f"{table} thead th[data-col='1']").click()  # rating: highest first
    assert _column(page, table) == ["alpha_model", "beta_model"]
    assert page.locator("#table-battle-hellaswag-wins tbody tr").first.locator("td").nth(1).text_content() == "0.625"
    assert page.errors == []


def test_mmlu_drilldown_filters_and_variants(page, report, tmp_path):
    from playwright.sync_api import expect  # retrying assertions: filters and routing run in event handlers

    made = report[1]["mmlu"]
    page.locator("a.scenario-link", has_text="mmlu").click()
    page.wait_for_selector("article.group")
    expect(page.locator("#overview")).to_be_hidden()
    assert page.locator("#scenario-title").text_content() == "mmlu"
    view = page.locator("#scenario-view")
    assert "Hendrycks et al. (2021)" in view.text_content() and "5" * 64 in view.text_content()
    count = page.locator("#instance-count")
    expect(count).to_have_attribute("data-matching", "3")

    first = page.locator(f"article.group[data-original='{made['ids'][0]}']")
    original, variant = first.locator("section.item.original"), first.locator("section.item.variant")
    assert "Which particle carries a negative charge?" in original.locator("pre.prompt").text_content()
    assert "Which force keeps planets" in original.locator("details.context pre").text_content()
    assert original.locator("td.answer code").first.text_content() == '" C"'
    assert original.locator("tr.gold td").nth(1).text_content() == "Electron"
    assert original.locator("td.chosen").count() == 2  # each model's letter probe choice is marked
    assert original.locator("table.scores tr.main td").all_text_contents() == ["1", "0"]
    assert variant.locator(".tag").text_content() == "mild_mix"
    assert "partcle" in variant.locator("pre.prompt").text_content()
    ob, vb = original.bounding_box(), variant.bounding_box()
    assert vb["x"] >= ob["x"] + ob["width"] - 1 and abs(vb["y"] - ob["y"]) < 1  # side by side

    xss = page.locator(f"article.group[data-original='{made['ids'][1]}'] pre.prompt")
    assert XSS in xss.text_content() and page.evaluate("window.__pwned") is None

    page.select_option("#filter-correct", "correct")
    expect(count).to_have_attribute("data-matching", "2")  # alpha_model: q1 and q3
    page.select_option("#filter-correct", "incorrect")
    expect(count).to_have_attribute("data-matching", "1")
    page.select_option("#filter-model", "1")
    expect(count).to_have_attribute("data-matching", "2")  # beta_model: q1 and q3 wrong
    page.select_option("#filter-correct", "all")
    page.fill("#filter-text", "joules")
    expect(count).to_have_attribute("data-matching", "1")
    page.fill("#filter-text", "")
    expect(count).to_have_attribute("data-matching", "3")

    shot = tmp_path / "mmlu.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 30_000
    assert page.errors == []


def test_hellaswag_drilldown_shows_options_and_choices(page, report, tmp_path):
    from playwright.sync_api import expect

    made = report[1]["hellaswag"]
    page.goto(report[0].as_uri() + "#scenario/hellaswag")
    page.wait_for_selector("#scenario-title:text('hellaswag')")
    second = page.locator(f"article.group[data-original='{made['ids'][1]}'] section.item")
    assert second.locator("pre.prompt").text_content() == "The cat sees a mouse. The cat"
    rows = second.locator("table.options tbody tr")
    assert rows.count() == 3 and rows.nth(1).get_attribute("class") == "gold"
    assert rows.nth(1).locator("td.chosen").count() == 1  # alpha picked the gold option
    assert rows.nth(2).locator("td.chosen").count() == 1  # beta picked "files taxes."
    assert second.locator("td.answer").all_text_contents() == ["2. chases it.", "3. files taxes."]
    page.select_option("#filter-correct", "incorrect")
    page.select_option("#filter-model", "1")
    expect(page.locator("#instance-count")).to_have_attribute("data-matching", "1")
    page.click("text=← Leaderboard")
    expect(page.locator("#overview")).to_be_visible()  # the hashchange handler runs after the click returns
    shot = tmp_path / "index.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 30_000
    assert page.errors == []
