"""Separate multiple-choice scenarios (OLMES-style cloze) on their real pinned files.

Each scenario: the first raw row's exact input and options, the gold, the instance count, and
content-hash ids (unique up to exact duplicate rows, the same on a second load). A few prompts
are built through the adapter, since the conf (nouns, partial, calibration) decides them.
"""

from __future__ import annotations

import dataclasses

import pytest

from evaltrail.adapters import get_adapter
from evaltrail.config import RunConfig, ScenarioConfig
from evaltrail.errors import EvaltrailError
from evaltrail.scenarios import get_scenario
from evaltrail.scenarios.rows import SKIPPED

from .conftest import write_arrow_stream

# name: (eval split, instance count, exact-duplicate rows, first input, first options, gold indices, metadata)
FIRST = {
    "mmlu_cloze": (
        "test",
        844,
        1,
        "Find the degree for the given field extension Q(sqrt(2), sqrt(3), sqrt(18)) over Q.",
        ("0", "4", "2", "6"),
        (1,),
        {"subject": "abstract_algebra", "subject_name": "abstract algebra"},
    ),
    "arc_easy": (
        "validation",
        570,
        0,
        "Which technology was developed most recently?",
        ("cellular telephone", "television", "refrigerator", "airplane"),
        (0,),
        {"id": "MCAS_2000_4_6"},
    ),
    "arc_challenge": (
        "validation",
        299,
        0,
        "Juan and LaKeisha roll a few objects down a ramp. They want to see which object rolls the "
        "farthest. What should they do so they can repeat their investigation?",
        (
            "Put the objects in groups.",
            "Change the height of the ramp.",
            "Choose different objects to roll.",
            "Record the details of the investigation.",
        ),
        (3,),
        {"id": "Mercury_SC_407695"},
    ),
    "piqa": (
        "validation",
        1838,
        0,
        "How do I ready a guinea pig cage for it's new occupants?",
        (
            "Provide the guinea pig with a cage full of a few inches of bedding made of ripped paper strips, "
            "you will also need to supply it with a water bottle and a food dish.",
            "Provide the guinea pig with a cage full of a few inches of bedding made of ripped jeans material, "
            "you will also need to supply it with a water bottle and a food dish.",
        ),
        (0,),
        {},
    ),
    "winogrande": (
        "validation",
        1267,
        0,
        "Sarah was a much better surgeon than Maria so _ always got the easier cases.",
        ("Sarah", "Maria"),
        (1,),
        {},
    ),
    "commonsense_qa": (
        "validation",
        1221,
        0,
        "A revolving door is convenient for two direction travel, but it also serves as a security measure at a what?",
        ("bank", "library", "department store", "mall", "new york"),
        (0,),
        {"id": "1afa02df02c908a558b4036e80242fac", "question_concept": "revolving door"},
    ),
    "social_iqa": (
        "validation",
        1954,
        19,
        "Tracy didn't go home that evening and resisted Riley's attacks. What does Tracy need to do before this?",
        ("make a new plan", "Go home and see Riley", "Find somewhere to go"),
        (2,),
        {},
    ),
    "openbookqa": (
        "validation",
        500,
        0,
        "Frilled sharks and angler fish live far beneath the surface of the ocean, which is why they are known as",
        ("Deep sea animals", "fish", "Long Sea Fish", "Far Sea Animals"),
        (0,),
        {"id": "8-376"},
    ),
}


def _load(fetched, name):
    cfg, raw = fetched(name)
    return cfg, get_scenario(name).load(cfg, raw)


@pytest.mark.parametrize("name", sorted(FIRST))
def test_first_row_count_and_ids(fetched, name):
    split, count, dupes, text, options, gold, meta = FIRST[name]
    cfg, splits = _load(fetched, name)
    assert cfg.eval_split == split and list(splits) == [split]  # 0-shot: no train split loaded
    insts = splits[split]
    assert len(insts) == count
    first = insts[0]
    assert (first.input, first.choices, first.gold_indices, first.metadata) == (text, options, gold, meta)
    # ids are content hashes: equal exactly when (input, references) are equal, i.e. duplicate rows
    contents = {i.instance_id: (i.input, i.references) for i in insts}
    assert len(contents) == count - dupes == len(set(contents.values()))
    assert [i.instance_id for i in get_scenario(name).load(cfg, fetched(name)[1])[split]] == [
        i.instance_id for i in insts
    ]


def test_arc_numeric_answer_key_maps_by_label(fetched):
    _, splits = _load(fetched, "arc_easy")
    inst = next(i for i in splits["validation"] if i.metadata["id"] == "NYSEDREGENTS_2014_8_10")  # labels 1-4, key "1"
    assert inst.choices[inst.gold_indices[0]] == "obtain energy" and inst.gold_indices == (0,)
    assert {len(i.references) for i in splits["validation"]} == {3, 4, 5}


def test_commonsense_qa_repeated_gold_option_is_correct_twice(fetched):
    _, splits = _load(fetched, "commonsense_qa")
    inst = next(i for i in splits["validation"] if i.metadata["id"] == "e5ad2184e37ae88b2bf46bf6bc0ed2f4")
    assert inst.choices == ("indestructible", "durable", "undestroyable", "indestructible", "unbreakable")
    assert inst.gold_indices == (0, 3)  # key D; option A is the same text
    assert sum(len(i.gold_indices) > 1 for i in splits["validation"]) == 6


def _requests(fetched, name):
    """The adapter's requests for the first instance alone."""
    cfg, splits = _load(fetched, name)
    cfg = dataclasses.replace(cfg, perturbations=[])  # the original's prompt; variants are tested elsewhere
    first = {cfg.eval_split: splits[cfg.eval_split][:1]}
    run = RunConfig(
        seed=0,
        max_eval_instances=0,
        bootstrap_samples=0,
        scenarios=[name],
        models=[],
        scenario={name: cfg},
        model={},
        mlflow={},
    )
    return [r for _, r in get_adapter(cfg.method).build(cfg, run, first)]


def test_cloze_prompts(fetched):
    [req, *_] = _requests(fetched, "arc_easy")
    assert req.prompt == "Question: Which technology was developed most recently?\nAnswer:"
    assert req.continuation == " cellular telephone"
    social = _requests(fetched, "social_iqa")
    assert social[2].prompt.startswith("Question: Tracy didn't go home that evening and resisted Riley's attacks. What")
    assert social[2].prompt.endswith("\nAnswer:") and social[2].continuation == " Find somewhere to go"
    mmlu = _requests(fetched, "mmlu_cloze")
    assert len(mmlu) == 4 and mmlu[1].continuation == " 4" and mmlu[1].few_shot_ids == ()
    assert mmlu[1].prompt == (
        "The following are multiple choice questions (with answers) about abstract algebra.\n\n"
        "Question: Find the degree for the given field extension Q(sqrt(2), sqrt(3), sqrt(18)) over Q.\nAnswer:"
    )


def test_winogrande_partial_prompts(fetched):
    reqs = _requests(fetched, "winogrande")
    assert [(r.prompt, r.continuation) for r in reqs] == [
        ("Sarah was a much better surgeon than Maria so Sarah", " always got the easier cases."),
        ("Sarah was a much better surgeon than Maria so Maria", " always got the easier cases."),
    ]


def test_openbookqa_is_calibrated(fetched):
    reqs = _requests(fetched, "openbookqa")
    plain = [r for r in reqs if not r.calibration]
    calib = [r for r in reqs if r.calibration]
    assert len(plain) == len(calib) == 4
    assert {r.prompt for r in calib} == {"Answer:"} and calib[0].continuation == " Deep sea animals"
    assert plain[0].prompt.startswith("Question: Frilled sharks") and plain[0].prompt.endswith("known as\nAnswer:")


def _cfg(name, **kw):
    return ScenarioConfig(
        name=name,
        method="multiple_choice_separate",
        eval_split="validation",
        metrics=["acc"],
        main_metric="acc",
        sources=[],
        **kw,
    )


def test_malformed_rows_name_file_and_row(tmp_path):
    good = {"sentence": "A _ b.", "option1": "x", "option2": "y", "answer": "1"}
    write_arrow_stream(tmp_path / "validation.arrow", [good, {**good, "sentence": "no blank", "answer": "2"}])
    with pytest.raises(EvaltrailError, match=r"validation\.arrow:2: malformed row .*0 blanks"):
        get_scenario("winogrande").load(_cfg("winogrande"), tmp_path)
    SKIPPED.clear()
    [inst] = get_scenario("winogrande").load(_cfg("winogrande", max_malformed=1), tmp_path)["validation"]
    assert inst.gold_indices == (0,)
    SKIPPED.clear()


def test_answer_key_must_be_a_label(tmp_path):
    row = {"id": "q1", "question": "Q?", "choices": {"text": ["a", "b"], "label": ["A", "B"]}, "answerKey": "C"}
    write_arrow_stream(tmp_path / "validation.arrow", [row])
    with pytest.raises(EvaltrailError, match=r"validation\.arrow:1: malformed row"):
        get_scenario("arc_challenge").load(_cfg("arc_challenge"), tmp_path)
