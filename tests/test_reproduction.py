"""Reproduction tables: the cards' rows as configured, and measured vs published arithmetic."""

from __future__ import annotations

import math
import os

import pytest

from evaltrail.aggregate import reproduction
from evaltrail.config import run_from_conf
from evaltrail.errors import EvaltrailError

from .conftest import ROOT


def compose(suite: str, *overrides: str):
    return run_from_conf([f"suite={suite}", *overrides], ROOT / "conf")


# The numbers the two model cards publish (issue: "Reproducing a published result").
CARDS = {
    "reproduce_gemma3_270m_card": (
        "gemma3_270m",
        {
            "PIQA": (67.7, 0),
            "ARC-e": (57.7, 0),
            "BoolQ": (61.4, 0),
            "HellaSwag": (40.9, 10),
            "ARC-c": (29.0, 25),
            "WinoGrande": (52.0, 5),
        },
    ),
    "reproduce_smollm2_135m_instruct_card": (
        "smollm2_135m_instruct",
        {"HellaSwag": (40.9, 0), "ARC (average)": (37.3, 0), "PIQA": (66.3, 0), "MMLU (cloze)": (29.3, 0)},
    ),
}


@pytest.mark.parametrize("suite", sorted(CARDS))
def test_card_suites_hold_the_published_rows_and_match_their_shots(suite):
    run = compose(suite)
    card = reproduction.parse(run.reproduce, run)
    model, rows = CARDS[suite]
    assert card.name == suite and run.models == [model] == [card.model] and card.tolerance == 2.0
    assert {r.benchmark: (r.value, r.shots) for r in card.rows if r.sensitivity is None} == rows
    assert len({r.benchmark for r in card.rows if r.sensitivity is None}) == len(rows)  # one headline per benchmark
    assert {r.benchmark for r in card.rows if r.sensitivity} <= set(rows)  # sensitivity rows beside a headline
    assert card.source.startswith("https://huggingface.co/")
    for row in card.rows:  # each scenario is configured with the card's number of shots
        assert all(run.scenario[s].num_shots == row.shots for s in row.scenarios), row.benchmark
    assert run.max_eval_instances is None  # complete evaluation sets


def test_smollm2_card_uses_all_mmlu_subjects():
    run = compose("reproduce_smollm2_135m_instruct_card")
    assert run.scenario["mmlu_cloze"].options["subjects"] == "all"
    rows = reproduction.parse(run.reproduce, run).rows
    assert [r.scenarios for r in rows if r.benchmark.startswith("ARC") and r.sensitivity is None] == [
        ["arc_easy_test", "arc_challenge_test"]
    ]
    # the card's harness convention (lighteval's loglikelihood_acc_norm_nospace) on every headline row
    assert {r.metric for r in rows if r.sensitivity is None} == {"acc_norm_nospace"}


def test_default_suite_reproduces_nothing():
    run = compose("default")
    assert reproduction.parse(run.reproduce, run) is None
    assert "reproduces no published result" in reproduction.to_markdown(None, [])


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda r: r["rows"][0].update(scenarios=["mmlu"]), "rows[0].scenarios: 'mmlu' is not a scenario"),
        (lambda r: r["rows"][1].update(metric="bleu_4"), "rows[1].metric: 'bleu_4' is not scored on arc_easy"),
        (lambda r: r["rows"][0].update(valu=1.0), "rows[0].valu: unknown key"),
        (lambda r: r.update(model="gpt"), "reproduce.model: 'gpt' is not a model"),
        (lambda r: r.update(rows=[]), "reproduce.rows: a non-empty list"),
    ],
)
def test_bad_reproduce_block_names_the_key(edit, message):
    run = compose("reproduce_gemma3_270m_card")
    raw = {**run.reproduce, "rows": [dict(r) for r in run.reproduce["rows"]]}
    edit(raw)
    with pytest.raises(EvaltrailError, match=message.replace("[", r"\[").replace("(", r"\(")):
        reproduction.parse(raw, run)


def _summary(mean, low, high, n):
    stats = {"mean": mean, "ci_low": low, "ci_high": high, "n": n}
    return {"metrics": {"acc_norm": stats, "acc_norm_nospace": stats}}


def test_table_measures_delta_ci_and_names_every_difference():
    run = compose("reproduce_smollm2_135m_instruct_card", "max_eval_instances=100")
    card = reproduction.parse(run.reproduce, run)
    m = card.model
    summaries = {
        ("hellaswag", m): _summary(0.40, 0.31, 0.50, 100),
        ("arc_easy", m): _summary(0.50, 0.40, 0.60, 100),
        ("arc_challenge", m): _summary(0.30, 0.22, 0.38, 100),
        ("arc_easy_test", m): _summary(0.52, 0.42, 0.62, 100),
        ("arc_challenge_test", m): _summary(0.28, 0.20, 0.36, 100),
        ("piqa", m): _summary(0.66, 0.56, 0.75, 100),
        ("mmlu_cloze", m): _summary(0.29, 0.27, 0.31, 2000),
    }
    prepared = {
        "hellaswag": {"loaded": {"validation": 10042}},
        "arc_easy": {"loaded": {"validation": 570}},
        "arc_challenge": {"loaded": {"validation": 299}},
        "arc_easy_test": {"loaded": {"test": 2376}},
        "arc_challenge_test": {"loaded": {"test": 1172}},
        "piqa": {"loaded": {"validation": 100}},
        "mmlu_cloze": {"loaded": {"test": 2027, "dev": 285}, "repeated_rows": {"test": 27}},
    }
    records = reproduction.table(card, run, summaries, prepared)
    rows = {(r["benchmark"], r["sensitivity"]): r for r in records}
    assert len(rows) == len(records) == 9

    hs = rows[("HellaSwag", None)]
    assert (hs["measured"], hs["ci_low"], hs["ci_high"], hs["n"]) == (40.0, 31.0, 50.0, 100)
    assert hs["delta"] == pytest.approx(-0.9) and hs["within_tolerance"] and hs["published_in_ci"]
    assert hs["differs"] == ["seeded sample of 100 of 10,042 instances"]

    assert rows[("ARC (average)", None)]["scenarios"] == ["arc_easy_test", "arc_challenge_test"]
    assert "arc_easy_test: seeded sample of 100 of 2,376 instances" in rows[("ARC (average)", None)]["differs"]
    arc = rows[("ARC (average)", "validation splits")]  # equal-weight mean; CI half-widths combined in quadrature
    half = math.sqrt(10.0**2 + 8.0**2) / 2
    assert arc["measured"] == 40.0 and arc["n"] == 200
    assert arc["ci_low"] == pytest.approx(40 - half, abs=1e-4) and arc["ci_high"] == pytest.approx(40 + half, abs=1e-4)
    assert arc["delta"] == pytest.approx(2.7) and not arc["within_tolerance"] and arc["published_in_ci"]
    assert "arc_easy: split validation (card test)" in arc["differs"]
    assert "arc_challenge: seeded sample of 100 of 299 instances" in arc["differs"]
    assert arc["differs"][-1] == "mean of ARC-Easy and ARC-Challenge"

    assert rows[("PIQA", None)]["differs"] == []  # the complete validation set, 0-shot, as the card
    assert rows[("MMLU (cloze)", None)]["differs"] == [  # every distinct question: no sample
        "27 of the 2,027 rows repeat another word for word: evaluated once",
        "micro average over questions (the card does not say micro or macro)",
    ]

    md = reproduction.to_markdown(card, records, "b" * 64)
    assert sum(line.startswith("| ") for line in md.splitlines()) == 1 + len(rows)  # header, one line per row
    assert (
        "| HellaSwag | 0-shot, validation, per character of the option | acc_norm_nospace on hellaswag | "
        "0-shot, loglikelihood of each option after the prompt | 100 | 40.9 | 40.0 [31.0, 50.0] | -0.9 | yes | yes |"
        in md
    )
    headline = [r for r in records if r["sensitivity"] is None]
    ok, in_ci = (sum(r[k] for r in headline) for k in ("within_tolerance", "published_in_ci"))
    assert f"**{ok} of 4** rows within it, **{in_ci} of 4** with the card's value inside the 95% CI (5 sens" in md
    assert "b" * 64 in md
    engine = {"llama_cpp_python": "0.3.36", "profile": "x86_64_avx2", "sha256": "8" * 64}
    with_engine = reproduction.to_markdown(card, records, "b" * 64, engine)
    assert "llama-cpp-python 0.3.36, kernel profile `x86_64_avx2`, build sha256 `" + "8" * 64 in with_engine
    assert "engine" not in md.lower().split("against its card")[1][:200]  # only when the summaries name one

    # a sensitivity row: listed after the headline rows, marked, with its own CI, never counted
    alt = {**rows[("PIQA", None)], "sensitivity": "per character of the option", "within_tolerance": True}
    hl = [r for r in headline if r["benchmark"] != "PIQA"]
    md = reproduction.to_markdown(card, [alt, *hl], "b" * 64)
    assert f"**{sum(r['within_tolerance'] for r in hl)} of 3** rows within it, " in md
    assert "CI (1 sensitivity row, marked," in md
    table_lines = [line for line in md.splitlines() if line.startswith("| ") and not line.startswith("| benchmark")]
    assert table_lines[-1].startswith("| PIQA (sensitivity: per character of the option) | 0-shot, validation")


def test_few_shot_rows_name_where_the_shots_come_from():
    run = compose("reproduce_gemma3_270m_card")
    card = reproduction.parse(run.reproduce, run)
    m = card.model
    hs = next(r for r in card.rows if r.benchmark == "HellaSwag")
    rec = reproduction.table(
        reproduction.Reproduction(card.name, m, card.source, [hs]),
        run,
        {("hellaswag", m): _summary(0.42, 0.41, 0.43, 10042)},
        {"hellaswag": {"loaded": {"validation": 10042}}},
    )[0]
    assert rec["differs"] == ["shots drawn from validation, never the instance itself"]
    assert os.path.basename(card.source) == "gemma-3-270m"


def test_protocol_names_how_each_row_asks_the_model():
    run = compose("reproduce_gemma3_270m_card")
    said = {s: reproduction.protocol(run.scenario[s]) for s in run.scenario}
    assert said["boolq"] == f"0-shot, greedy generation, up to {run.scenario['boolq'].max_tokens} tokens"
    assert said["boolq_loglikelihood"] == "0-shot, loglikelihood of each option after the prompt"
    assert said["winogrande"] == "5-shot, loglikelihood of the text after the blank, filled with each option"
    assert said["winogrande_option"] == "5-shot, loglikelihood of each option after the prompt"
    assert said["arc_challenge_test"].startswith("25-shot, ")
