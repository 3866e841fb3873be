"""Toxicity corpus metrics: the offline classifier and HELM's aggregates over generation groups."""

from __future__ import annotations

import importlib.util
from importlib.metadata import version

import pytest

from evaltrail.metrics.toxicity import (
    TOXIC_THRESHOLD,
    expected_max_toxicity,
    max_toxicity_probability,
    toxic_fraction,
    toxicity_summary,
)

needs_classifier = pytest.mark.skipif(
    importlib.util.find_spec("profanity_check") is None, reason="alt-profanity-check is not installed"
)

TOXIC = "You are a fucking idiot, shut up you stupid bitch."
CLEAN = "The weather is lovely today and we enjoyed a walk in the park."

# per instance: its generations' scores
GROUPS = [[0.1, 0.7, 0.4], [0.2, 0.3], [0.5], []]


def test_expected_max_toxicity_hand_computed():
    assert expected_max_toxicity(GROUPS) == pytest.approx((0.7 + 0.3 + 0.5 + 0.0) / 4)
    assert expected_max_toxicity([[0.9]]) == pytest.approx(0.9)


def test_max_toxicity_probability_hand_computed():
    assert TOXIC_THRESHOLD == 0.5
    assert max_toxicity_probability(GROUPS) == pytest.approx(2 / 4)  # 0.7 and 0.5 (>= counts)
    assert max_toxicity_probability(GROUPS, threshold=0.75) == 0.0


def test_toxic_fraction_is_a_mean_of_per_instance_fractions():
    assert toxic_fraction(GROUPS) == pytest.approx((1 / 3 + 0 + 1 + 0) / 4)
    assert toxic_fraction([[0.9, 0.1], [0.9, 0.9, 0.9, 0.9]]) == pytest.approx((1 / 2 + 1) / 2)  # not 5/6


def test_no_instances_is_none_and_scores_are_checked():
    assert expected_max_toxicity([]) is None and max_toxicity_probability([]) is None and toxic_fraction([]) is None
    for bad in ([[1.5]], [[-0.1]], [[float("nan")]]):
        with pytest.raises(ValueError):
            expected_max_toxicity(bad)


def test_summary():
    s = toxicity_summary(GROUPS)
    assert (s.n_instances, s.n_generations, s.threshold) == (4, 6, 0.5)
    assert s.expected_max_toxicity == pytest.approx(0.375) and s.max_toxicity_probability == pytest.approx(0.5)
    assert s.toxic_fraction == pytest.approx(1 / 3) and s.classifier_version is None


@needs_classifier
def test_classifier_separates_toxic_from_clean():
    from evaltrail.metrics.toxicity import (
        classifier_version,
        toxicity_probabilities,
    )

    toxic, clean = toxicity_probabilities([TOXIC, CLEAN])
    assert toxic > 0.9 and clean < 0.2
    assert toxicity_probabilities([TOXIC]) == [pytest.approx(toxic)]  # a text scores alone as in a batch
    assert toxicity_probabilities([]) == []
    assert classifier_version() == version("alt-profanity-check")


@needs_classifier
def test_scores_from_texts_drop_empty_generations():
    from evaltrail.metrics.toxicity import score_generations, toxicity_summary_of_texts

    scores = score_generations([[CLEAN, "", TOXIC], [""], [CLEAN]])
    assert [len(g) for g in scores] == [2, 0, 1]
    s = toxicity_summary_of_texts([[CLEAN, "", TOXIC], [""], [CLEAN]])
    assert s.max_toxicity_probability == pytest.approx(1 / 3)
    assert s.toxic_fraction == pytest.approx((1 / 2 + 0 + 0) / 3)
    assert s.n_generations == 3 and s.classifier == "alt-profanity-check"
    assert s.classifier_version == version("alt-profanity-check")
