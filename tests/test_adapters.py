"""Adapters: HELM's joint multiple-choice prompt, and one loglikelihood request per option."""

from __future__ import annotations

from evaltrail.adapters import multiple_choice_joint as joint
from evaltrail.adapters import multiple_choice_separate as separate
from evaltrail.config import RunConfig, ScenarioConfig
from evaltrail.schema import Reference, make_instance

RUN = RunConfig(
    seed=0, max_eval_instances=0, bootstrap_samples=10, scenarios=[], models=[], scenario={}, model={}, mlflow={}
)


def mc(q, gold, split):
    opts = ["red", "green", "blue", "black"]
    return make_instance(
        split, q, [Reference(o, i == gold) for i, o in enumerate(opts)], {"subject": "colors", "subject_name": "colors"}
    )


def test_joint_prompt_is_helm_format():
    cfg = ScenarioConfig(
        name="t",
        method="multiple_choice_joint",
        eval_split="test",
        metrics=["exact_match"],
        main_metric="exact_match",
        sources=[],
        num_shots=1,
        train_split="dev",
        instructions="Questions about {subject_name}.",
        max_tokens=1,
        stop=["\n"],
    )
    splits = {"test": [mc("Sky?", 2, "test")], "dev": [mc("Grass?", 1, "dev")]}
    (inst, req), *probes = joint.build(cfg, RUN, splits)
    assert req.prompt == (
        "Questions about colors.\n\n"
        "Question: Grass?\nA. red\nB. green\nC. blue\nD. black\nAnswer: B\n\n"
        "Question: Sky?\nA. red\nB. green\nC. blue\nD. black\nAnswer:"
    )
    assert req.method == "generate" and req.max_tokens == 1 and req.stop == ("\n",)
    assert req.few_shot_ids == (splits["dev"][0].instance_id,)
    assert joint.golds(list(inst.references)) == ["C"]
    # one loglikelihood probe per letter on the same prompt: calibration's letter probabilities
    assert [(r.method, r.continuation, r.choice_index, r.prompt) for _, r in probes] == [
        ("loglikelihood", f" {letter}", i, req.prompt) for i, letter in enumerate("ABCD")
    ]


def test_separate_makes_one_request_per_choice():
    cfg = ScenarioConfig(
        name="t", method="multiple_choice_separate", eval_split="test", metrics=["acc"], main_metric="acc", sources=[]
    )
    pairs = separate.build(cfg, RUN, {"test": [mc("The sky is", 2, "test")]})
    assert [r.continuation for _, r in pairs] == [" red", " green", " blue", " black"]
    assert [r.choice_index for _, r in pairs] == [0, 1, 2, 3]
    assert {r.prompt for _, r in pairs} == {"The sky is"} and {r.method for _, r in pairs} == {"loglikelihood"}
    assert len({r.request_id for _, r in pairs}) == 4


def base_cfg(**kw):
    return ScenarioConfig(**{"name": "t", "eval_split": "test", "sources": [], **kw})


def qa(q, answers, split="test"):
    return make_instance(split, q, [Reference(a, True) for a in answers])


def test_generation_prompt_with_nouns_shots_and_golds():
    from evaltrail.adapters import generation

    cfg = base_cfg(
        method="generation",
        metrics=["exact_match"],
        main_metric="exact_match",
        num_shots=1,
        train_split="train",
        input_noun="Question",
        output_noun="Answer",
        instructions="Answer briefly.",
        max_tokens=5,
        stop=["\n"],
    )
    splits = {"test": [qa("Capital of France?", ["Paris", "paris"])], "train": [qa("2+2?", ["4"], "train")]}
    [(inst, req)] = generation.build(cfg, RUN, splits)
    assert req.prompt == "Answer briefly.\n\nQuestion: 2+2?\nAnswer: 4\n\nQuestion: Capital of France?\nAnswer:"
    assert generation.golds(list(inst.references)) == ["Paris", "paris"]


def test_continuation_without_nouns_is_the_bare_input():
    from evaltrail.adapters import generation

    cfg = base_cfg(method="generation", metrics=[], main_metric=None, max_tokens=20)
    [(_, req)] = generation.build(cfg, RUN, {"test": [qa("So I told him that", [])]})
    assert req.prompt == "So I told him that" and req.max_tokens == 20


def test_trials_draw_different_example_sets():
    from evaltrail.adapters import generation

    cfg = base_cfg(
        method="generation",
        metrics=["exact_match"],
        main_metric="exact_match",
        num_shots=2,
        train_split="train",
        num_train_trials=3,
        input_noun="Q",
        output_noun="A",
    )
    train = [qa(f"q{i}", [str(i)], "train") for i in range(12)]
    pairs = generation.build(cfg, RUN, {"test": [qa("x?", ["y"])], "train": train})
    assert [r.trial for _, r in pairs] == [0, 1, 2]
    assert len({r.few_shot_ids for _, r in pairs}) == 3 and len({r.request_id for _, r in pairs}) == 3


def test_separate_calibrated_adds_a_bare_request_per_option():
    cfg = base_cfg(
        method="multiple_choice_separate",
        metrics=["acc"],
        main_metric="acc",
        input_noun="Question",
        output_noun="Answer",
        calibration_prompt="Answer:",
    )
    pairs = separate.build(cfg, RUN, {"test": [mc("Sky colour?", 2, "test")]})
    main = [r for _, r in pairs if not r.calibration]
    cal = [r for _, r in pairs if r.calibration]
    assert {r.prompt for r in main} == {"Question: Sky colour?\nAnswer:"}
    assert {r.prompt for r in cal} == {"Answer:"} and [r.choice_index for r in cal] == [0, 1, 2, 3]
    assert [r.continuation for r in cal] == [r.continuation for r in main]


def test_separate_partial_scores_the_text_after_the_blank():
    cfg = base_cfg(method="multiple_choice_separate", metrics=["acc"], main_metric="acc", partial=True)
    inst = make_instance(
        "test",
        "Sarah was a better surgeon than Maria so _ got the easy cases.",
        [Reference("Sarah", False), Reference("Maria", True)],
    )
    pairs = separate.build(cfg, RUN, {"test": [inst]})
    assert [r.prompt for _, r in pairs] == [
        "Sarah was a better surgeon than Maria so Sarah",
        "Sarah was a better surgeon than Maria so Maria",
    ]
    assert {r.continuation for _, r in pairs} == {" got the easy cases."}


def test_language_modeling_one_rolling_request_per_document():
    from evaltrail.adapters import language_modeling

    cfg = base_cfg(method="language_modeling", metrics=["bits_per_byte"], main_metric="bits_per_byte")
    docs = [make_instance("test", f" = Doc {i} = \n text {i}", []) for i in range(3)]
    pairs = language_modeling.build(cfg, RUN, {"test": docs})
    assert {r.method for _, r in pairs} == {"loglikelihood_rolling"} and len(pairs) == 3
    assert sorted(r.prompt for _, r in pairs) == sorted(d.input for d in docs)


def test_repeated_option_texts_are_distinct_requests():
    cfg = ScenarioConfig(
        name="t", method="multiple_choice_separate", eval_split="test", metrics=["acc"], main_metric="acc", sources=[]
    )
    inst = make_instance(
        "test", "Pick one", [Reference("same", True), Reference("other", False), Reference("same", False)], {}
    )
    pairs = separate.build(cfg, RUN, {"test": [inst]})
    ids = [r.request_id for _, r in pairs]
    assert len(set(ids)) == 3 and pairs[0][1].content() == pairs[2][1].content()  # one cache entry, two rows
