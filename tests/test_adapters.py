"""Adapters: HELM's joint multiple-choice prompt, and one loglikelihood request per option."""

from __future__ import annotations

from evaltrail.adapters import multiple_choice_joint as joint
from evaltrail.adapters import multiple_choice_separate as separate
from evaltrail.config import RunConfig, ScenarioConfig
from evaltrail.schema import Reference, make_instance

RUN = RunConfig(seed=0, max_eval_instances=0, bootstrap_samples=10, scenarios=[], models=[],
                scenario={}, model={}, mlflow={})


def mc(q, gold, split):
    opts = ["red", "green", "blue", "black"]
    return make_instance(split, q, [Reference(o, i == gold) for i, o in enumerate(opts)],
                         {"subject": "colors", "subject_name": "colors"})


def test_joint_prompt_is_helm_format():
    cfg = ScenarioConfig(name="t", method="multiple_choice_joint", eval_split="test", metrics=["exact_match"],
                         main_metric="exact_match", sources=[], num_shots=1, train_split="dev",
                         instructions="Questions about {subject_name}.", max_tokens=1, stop=["\n"])
    splits = {"test": [mc("Sky?", 2, "test")], "dev": [mc("Grass?", 1, "dev")]}
    [(inst, req)] = joint.build(cfg, RUN, splits)
    assert req.prompt == ("Questions about colors.\n\n"
                          "Question: Grass?\nA. red\nB. green\nC. blue\nD. black\nAnswer: B\n\n"
                          "Question: Sky?\nA. red\nB. green\nC. blue\nD. black\nAnswer:")
    assert req.method == "generate" and req.max_tokens == 1 and req.stop == ("\n",)
    assert req.few_shot_ids == (splits["dev"][0].instance_id,)
    assert joint.golds(list(inst.references)) == ["C"]


def test_separate_makes_one_request_per_choice():
    cfg = ScenarioConfig(name="t", method="multiple_choice_separate", eval_split="test", metrics=["acc"],
                         main_metric="acc", sources=[])
    pairs = separate.build(cfg, RUN, {"test": [mc("The sky is", 2, "test")]})
    assert [r.continuation for _, r in pairs] == [" red", " green", " blue", " black"]
    assert [r.choice_index for _, r in pairs] == [0, 1, 2, 3]
    assert {r.prompt for _, r in pairs} == {"The sky is"} and {r.method for _, r in pairs} == {"loglikelihood"}
    assert len({r.request_id for _, r in pairs}) == 4
