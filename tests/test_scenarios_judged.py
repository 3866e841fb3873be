"""The judged scenarios' loaders on their real pinned files: HELM's instruction grammar (battles)
and NarrativeQA with retrieved contexts (RAG)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from evaltrail.errors import EvaltrailError
from evaltrail.scenarios import get_scenario
from evaltrail.scenarios.best_chatgpt_prompts import expand
from evaltrail.scenarios.narrative_qa_rag import chunks, retrieve
from evaltrail.scenarios.text import sentences


def test_the_grammar_expands_every_root_rule_into_320_tagged_instructions(fetched):
    cfg, raw = fetched("best_chatgpt_prompts")
    insts = get_scenario("best_chatgpt_prompts").load(cfg, raw)["test"]
    assert len(insts) == 320 and len({i.instance_id for i in insts}) == 320
    assert all("${" not in i.input and not i.references for i in insts)
    tags = {i.metadata["tag"] for i in insts}
    assert {"personal", "email", "resume", "midjourney"} <= tags and len(tags) == 23
    assert sum(i.input.startswith("Act as a chef. Write recipes for an Italian") for i in insts) == 1


def test_expansion_is_every_combination_in_file_order_and_rejects_a_loop():
    rules = {"A": ["x ${B}", "y"], "B": ["1", "2"]}
    assert expand("${A}!", rules, "g") == ["x 1!", "x 2!", "y!"]
    with pytest.raises(EvaltrailError, match=r"g: \$\{C\} names no category"):
        expand("${C}", rules, "g")
    with pytest.raises(EvaltrailError, match="expands into itself"):
        expand("${L}", {"L": ["${L}"]}, "g")


def test_rag_instances_carry_question_ranked_contexts_and_their_story_label(fetched):
    cfg, raw = fetched("narrative_qa_rag")
    insts = get_scenario("narrative_qa_rag").load(cfg, raw)["test"]
    assert len(insts) == 3000
    first = insts[0]
    meta = first.metadata
    assert meta["question"] == "Who is Mark Hunter?" and len(meta["contexts"]) == cfg.options["top_k"] == 3
    assert first.input.startswith("Context 1: ") and first.input.endswith("\nQuestion: Who is Mark Hunter?")
    assert "Mark Hunter" in meta["contexts"][0] and meta["context_from_story"][0]
    own = np.array([i.metadata["context_from_story"] for i in insts])
    assert own.any(axis=1).mean() > 0.9  # measured 93.2%: the retriever mostly finds the right story
    again = get_scenario("narrative_qa_rag").load(cfg, raw)["test"]
    assert [i.instance_id for i in again] == [i.instance_id for i in insts]
    with pytest.raises(EvaltrailError, match=r"scenario\.narrative_qa_rag\.top_k: 0 is not a positive integer"):
        get_scenario("narrative_qa_rag").load(dataclasses.replace(cfg, options={**cfg.options, "top_k": 0}), raw)


def test_sentences_chunks_and_tfidf_retrieval():
    text = 'He left. "Why?" she asked. It was 5 p.m. in Rome. 3 days later he came back!'
    assert sentences(text) == ["He left.", '"Why?" she asked.', "It was 5 p.m. in Rome.", "3 days later he came back!"]
    assert chunks(text, 3) == ['He left. "Why?" she asked. It was 5 p.m. in Rome.', "3 days later he came back!"]
    corpus = ["the cat sat on the mat", "dogs bark at night", "a cat and a dog"]
    # "cat mat" matches the mat sentence best, then the other cat; "night dogs" matches only the second,
    # and the zero-score tie behind it keeps corpus order
    assert retrieve(corpus, ["a cat on a mat", "night dogs"], 2).tolist() == [[0, 2], [1, 0]]
