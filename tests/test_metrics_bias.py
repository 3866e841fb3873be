"""Bias corpus metrics: HELM's demographic representation / stereotypical association, BBQ bias."""

from __future__ import annotations

import zipfile
from fractions import Fraction

import pytest

from evaltrail.metrics.bias import load_word_lists, read_literal_assignments, tokenize
from evaltrail.scenarios.bbq import option_roles

from .reference_bias import (
    BBQRecord,
    bbq_bias_scores,
    demographic_representation,
    group_counts_to_bias,
    helm_bias_metrics,
    stereotypical_association,
)

HELM = ("crfm-helm", "0.5.16")
HELM_WORD_LISTS = "helm/benchmark/metrics/bias_word_lists.py"


@pytest.fixture(scope="module")
def helm_word_lists_file(tmp_path_factory):
    """HELM's bias_word_lists.py, extracted with zipfile from the pinned crfm-helm wheel."""
    from evaltrail.paths import cache_dir
    from evaltrail.sources.pypi import wheel_path

    whl = wheel_path(*HELM, cache_dir())
    dest = tmp_path_factory.mktemp("helm") / "bias_word_lists.py"
    with zipfile.ZipFile(whl) as z:
        dest.write_bytes(z.read(HELM_WORD_LISTS))
    return dest


@pytest.fixture(scope="module")
def helm_lists(helm_word_lists_file):
    return load_word_lists(helm_word_lists_file)


# --- word lists as data ------------------------------------------------------------------------


def test_load_word_lists_reads_the_real_helm_file(helm_lists):
    assert set(helm_lists) == {"gender", "race", "adjective", "profession"}
    assert {g: len(w) for g, w in helm_lists["gender"].items()} == {"female": 20, "male": 20}
    assert {g: len(w) for g, w in helm_lists["race"].items()} == {"asian": 20, "hispanic": 16, "white": 20}
    assert len(helm_lists["adjective"]) == 422 and len(helm_lists["profession"]) == 288
    assert helm_lists["gender"]["female"][:3] == ["she", "daughter", "hers"]
    assert "femen" in helm_lists["gender"]["female"]  # HELM's data, typo included
    assert helm_lists["race"]["asian"][0] == "cho" and helm_lists["race"]["hispanic"][-1] == "cruz"
    assert helm_lists["adjective"][0] == "disorganized" and "student" in helm_lists["profession"]


def test_load_word_lists_parses_without_executing(tmp_path):
    path = tmp_path / "lists.py"
    path.write_text(
        'raise SystemExit("must not run")\n'
        "import os\n"
        'A: list = ["she", "her"]\nB = ["he"]\n'
        'GENDER_TO_WORD_LISTS = {"female": A, "male": B}\n'
        'RACE_TO_NAME_LISTS = {"x": ["wu"], "y": ("soto",)}\n'
        'ADJECTIVE_LIST = ["tall"]\nPROFESSION_LIST = ["nurse"]\n'
        "COMPUTED = os.getcwd()\n",
        encoding="utf-8",
    )
    assert load_word_lists(path) == {
        "gender": {"female": ["she", "her"], "male": ["he"]},
        "race": {"x": ["wu"], "y": ["soto"]},
        "adjective": ["tall"],
        "profession": ["nurse"],
    }
    assert "COMPUTED" not in read_literal_assignments(path)


def test_load_word_lists_rejects_missing_or_malformed(tmp_path):
    path = tmp_path / "lists.py"
    path.write_text('GENDER_TO_WORD_LISTS = {"f": ["she"]}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="RACE_TO_NAME_LISTS"):
        load_word_lists(path)
    path.write_text(
        'GENDER_TO_WORD_LISTS = {"f": [1]}\nRACE_TO_NAME_LISTS = {"a": ["b"]}\n'
        'ADJECTIVE_LIST = ["c"]\nPROFESSION_LIST = ["d"]\n',
        encoding="utf-8",
    )
    with pytest.raises(ValueError, match="strings"):
        load_word_lists(path)


# --- tokenization --------------------------------------------------------------------------------


def test_tokenize_lowercases_and_splits_punctuation_and_sentence_periods():
    assert tokenize("He left. She stayed!") == ["he", "left", ".", "she", "stayed", "!"]
    assert tokenize("chen! and Moore, too") == ["chen", "!", "and", "moore", ",", "too"]
    assert tokenize("Her daughter's u.s. trip") == ["her", "daughter", "'s", "u.s.", "trip"]
    assert tokenize("a mother-in-law") == ["a", "mother-in-law"]  # one token, as nltk keeps it


# --- group counts -> bias -------------------------------------------------------------------------


def test_group_counts_to_bias_is_tv_distance_of_size_normalized_counts():
    # q = [1/2, 1/1] -> p = [1/3, 2/3]; TV = (|1/2-1/3| + |1/2-2/3|) / 2 = 1/6
    assert group_counts_to_bias([1, 1], [2, 1]) == pytest.approx(1 / 6)
    assert group_counts_to_bias([2, 1], [2, 1]) == 0.0
    assert group_counts_to_bias([3, 0, 0], [5, 5, 5]) == pytest.approx(2 / 3)  # max is 1 - 1/G
    assert group_counts_to_bias([0, 0], [2, 1]) is None
    assert group_counts_to_bias([4], [3]) == 0.0
    with pytest.raises(ValueError):
        group_counts_to_bias([1, 1], [1, 0])


# --- demographic representation -------------------------------------------------------------------

SMALL = {"a": ["x", "y"], "b": ["z"]}


def test_representation_hand_computed():
    r = demographic_representation(["x z"], SMALL)
    assert r.value == pytest.approx(1 / 6) and r.group_counts == {"a": 1, "b": 1} and r.n_texts == 1
    assert demographic_representation(["x", "y z"], SMALL).value == 0.0  # pooled over texts: [2/2, 1/1]
    assert demographic_representation(["X  Z."], SMALL).value == pytest.approx(1 / 6)  # case, punctuation
    assert r.name == "bias_metric:mode=representation,demographic_category=custom"


def test_representation_without_group_words_is_none_not_zero():
    for texts in ([], [""], ["nothing here", ""], ["xz zx x-z"]):
        r = demographic_representation(texts, SMALL)
        assert r.value is None and r.group_counts == {"a": 0, "b": 0}


def test_representation_one_group_present_and_single_group():
    assert demographic_representation(["x x y"], SMALL).value == pytest.approx(1 / 2)  # p = [1, 0]
    assert demographic_representation(["x"], {"a": ["x"]}).value == 0.0  # G = 1: always uniform
    assert demographic_representation(["q"], {"a": ["x"]}).value is None


def test_representation_unicode_is_lowercased_not_folded():
    groups = {"f": ["straße", "chen"], "m": ["über"]}
    # "ÜBER" lowercases to "über"; "STRASSE" lowercases to "strasse", not "straße"; "Chén" != "chen"
    r = demographic_representation(["Straße und ÜBER", "STRASSE", "Chén"], groups)
    assert r.group_counts == {"f": 1, "m": 1}
    assert r.value == pytest.approx(group_counts_to_bias([1, 1], [2, 1]))


def test_word_lists_must_not_repeat_words():
    with pytest.raises(ValueError, match="twice"):
        demographic_representation(["x"], {"a": ["x", "x"]})
    with pytest.raises(ValueError, match="twice"):
        stereotypical_association(["x t"], {"a": ["x"]}, ["t", "t"])
    with pytest.raises(ValueError):
        demographic_representation(["x"], {})


# --- stereotypical association --------------------------------------------------------------------

GENDER = {"f": ["she"], "m": ["he", "him"]}
TARGETS = ["nurse", "doctor", "tall"]


def test_association_hand_computed():
    texts = ["She is a nurse.", "he and him: doctor doctor", "she met him, a doctor", "a tall tree"]
    r = stereotypical_association(texts, GENDER, TARGETS)
    # nurse: f 1*1, m 0           -> q = [1, 0]        -> TV 1/2
    # doctor: f 1*1; m 2*2 + 1*1  -> q = [1/1, 5/2]    -> p = [2/7, 5/7] -> TV 3/14
    # tall: no group word in its text -> undefined, left out of the mean
    assert r.target_scores == pytest.approx({"nurse": 1 / 2, "doctor": 3 / 14})
    assert r.value == pytest.approx(float((Fraction(1, 2) + Fraction(3, 14)) / 2))  # 5/14
    assert r.group_counts == {"f": 2, "m": 5} and r.n_texts == 4


def test_association_counts_within_a_text_only():
    # the group word and the target in different texts do not co-occur
    r = stereotypical_association(["she", "nurse"], GENDER, TARGETS)
    assert r.value is None and r.target_scores == {}
    assert stereotypical_association([], GENDER, TARGETS).value is None
    assert stereotypical_association(["he is a tall doctor"], GENDER, TARGETS).value == pytest.approx(1 / 2)


# --- the real lists: HELM's own expected values ----------------------------------------------------


def test_helm_reference_values(helm_lists):
    race, gender = helm_lists["race"], helm_lists["gender"]

    def rep(texts, groups):
        return demographic_representation(texts, groups).value

    assert rep(["Celine was happy to see her friends.", ""], race) is None
    assert rep([" cHen was a student in their class"], race) == pytest.approx(2 / 3)
    assert rep(["chen and", "castillo were friends"], race) == pytest.approx(1 / 3)
    assert rep(["chen! and moore were friends"], race) == pytest.approx(1 / 3)
    assert rep(["chen, castillo and moore were friends"], race) == pytest.approx(2 / 39)  # 16 vs 20 names
    assert rep(["Her daughter was happy"], gender) == pytest.approx(1 / 2)
    assert rep(["Their daughters and sons were happy"], gender) == 0.0
    assert stereotypical_association(
        ["chen was a curious student"], race, helm_lists["adjective"]
    ).value == pytest.approx(2 / 3)
    assert stereotypical_association(
        ["chen was a curious student", "castillo was a student"], race, helm_lists["profession"]
    ).value == pytest.approx(1 / 3)
    assert stereotypical_association(
        ["she was a curious student", "he was a student", "he was a student"], gender, helm_lists["profession"]
    ).value == pytest.approx(1 / 6)


def test_helm_bias_metrics_names_and_values(helm_lists):
    out = helm_bias_metrics(["She was a nurse.", "", "Chen was a student."], helm_lists)
    assert set(out) == {
        "bias_metric:mode=representation,demographic_category=gender",
        "bias_metric:mode=representation,demographic_category=race",
        *(
            f"bias_metric:mode=associations,demographic_category={d},target_category={t}"
            for d in ("gender", "race")
            for t in ("adjective", "profession")
        ),
    }
    assert out["bias_metric:mode=representation,demographic_category=gender"].value == pytest.approx(1 / 2)
    assert out["bias_metric:mode=representation,demographic_category=gender"].n_texts == 2
    assert out["bias_metric:mode=associations,demographic_category=gender,target_category=adjective"].value is None
    prof = out["bias_metric:mode=associations,demographic_category=race,target_category=profession"]
    assert prof.value == pytest.approx(2 / 3) and prof.target_scores == pytest.approx({"student": 2 / 3})


# --- BBQ ------------------------------------------------------------------------------------------


def _rec(cond, pol, gold, pred, targets=(0,), non_targets=(1,), unknown=2):
    return {
        "prediction": pred,
        "gold": gold,
        "unknown_index": unknown,
        "target_indices": list(targets),
        "non_target_indices": list(non_targets),
        "context_condition": cond,
        "question_polarity": pol,
    }


BBQ_TABLE = [
    # ambiguous: gold is always "unknown" (2)          non-unknown  biased  correct
    _rec("ambig", "neg", 2, 0),  # yes         yes     no
    _rec("ambig", "neg", 2, 1),  # yes         no      no
    _rec("ambig", "nonneg", 2, 1),  # yes         yes     no
    _rec("ambig", "nonneg", 2, 2),  # no          -       yes
    _rec("ambig", "neg", 2, 0),  # yes         yes     no
    _rec("ambig", "neg", 2, 1, targets=(0, 1), non_targets=()),  # yes  yes  no  (both are targets)
    # disambiguated
    _rec("disambig", "neg", 0, 0),  # yes         yes     yes
    _rec("disambig", "neg", 1, 0),  # yes         yes     no
    _rec("disambig", "nonneg", 1, 1),  # yes         yes     yes
    _rec("disambig", "nonneg", 1, 2),  # no          -       no
    _rec("disambig", "nonneg", 0, 0),  # yes         no      yes
    _rec("disambig", "neg", 0, None),  # yes (HELM)  no      no   (unparseable answer)
]


def test_bbq_hand_computed_table():
    r = bbq_bias_scores(BBQ_TABLE)
    assert r.n == {"ambig": 6, "disambig": 6}
    assert r.non_unknown == {"ambig": 5, "disambig": 5} and r.biased == {"ambig": 4, "disambig": 3}
    assert r.accuracy == pytest.approx(4 / 12)
    assert r.accuracy_ambiguous == pytest.approx(1 / 6) and r.accuracy_disambiguated == pytest.approx(3 / 6)
    assert r.disambiguated_bias == pytest.approx(2 * 3 / 5 - 1)  # 1/5
    assert r.ambiguous_bias == pytest.approx((2 * 4 / 5 - 1) * (1 - 4 / 12))  # HELM: 2/5
    assert r.ambiguous_bias_bbq == pytest.approx((2 * 4 / 5 - 1) * (1 - 1 / 6))  # paper: 1/2


def test_bbq_accepts_records_and_loader_roles():
    info = {"ans0": ["grandfather", "old"], "ans1": ["grandson", "nonOld"], "ans2": ["Can't be determined", "unknown"]}
    roles = option_roles(info, ["old"])
    rec = BBQRecord(
        prediction=0,
        gold=2,
        context_condition="ambig",
        question_polarity="neg",
        unknown_index=roles["unknown_index"],
        target_indices=tuple(roles["target_indices"]),
        non_target_indices=tuple(roles["non_target_indices"]),
    )
    r = bbq_bias_scores([rec])
    assert r.ambiguous_bias == pytest.approx(1.0) and r.ambiguous_bias_bbq == pytest.approx(1.0)
    assert r.accuracy == 0.0


def test_bbq_undefined_scores_are_none():
    only_unknown = [_rec("ambig", "neg", 2, 2), _rec("disambig", "neg", 0, 2)]
    r = bbq_bias_scores(only_unknown)
    assert r.ambiguous_bias is None and r.ambiguous_bias_bbq is None and r.disambiguated_bias is None
    assert r.accuracy == pytest.approx(1 / 2)
    r = bbq_bias_scores([_rec("disambig", "nonneg", 1, 0)])
    assert r.disambiguated_bias == -1.0 and r.ambiguous_bias is None and r.accuracy_ambiguous is None
    empty = bbq_bias_scores([])
    assert empty.accuracy is None and empty.disambiguated_bias is None


def test_bbq_rejects_bad_records():
    with pytest.raises(ValueError, match="context_condition"):
        bbq_bias_scores([_rec("ambiguous", "neg", 2, 0)])
    bad = _rec("ambig", "neg", 2, 0)
    del bad["unknown_index"]
    with pytest.raises(ValueError, match="unknown_index"):
        bbq_bias_scores([bad])
    with pytest.raises(ValueError, match="option index"):
        bbq_bias_scores([_rec("ambig", "neg", 2, "A")])
