"""Robustness and fairness perturbations: HELM's own examples, hand-checked seeded variants,
reproducibility, no-op and Unicode text, and variant ids. The misspelling list and last names
are read from the pinned crfm-helm wheel, the SAE->AAVE lexicon from the offline mirror."""

from __future__ import annotations

import hashlib
import os
import pickle
import random
import zipfile
from pathlib import Path

import pytest

from evaltrail.config import resources_from_conf
from evaltrail.errors import EvaltrailError
from evaltrail.perturbations import (
    Resources,
    gender,
    get_perturbation,
    list_perturbations,
    load_bias_last_names,
    load_dialect_mapping,
    load_misspellings,
    match_case,
    names,
    perturb_all,
    perturb_instance,
    rng_for,
    robustness,
    variant_id,
)
from evaltrail.schema import Reference, make_instance

from .conftest import ROOT

HELM_WHEEL = "crfm_helm-0.5.16-py3-none-any.whl"
PINS = {k: v["sha256"] for k, v in resources_from_conf(ROOT / "conf").items()}
"""The word lists' sha256, from their one home (conf/config.yaml `resources`)."""
SAE_AAVE = (
    "raw.githubusercontent.com/GT-SALT/value/4fa1b538a358a2af4462f7073d040b0177bec7e7/"
    "resources/sae_aave_mapping_dict.pkl"
)
KEYBOARD = {
    "q": "was",
    "w": "qesad",
    "e": "wsdfr",
    "r": "edfgt",
    "t": "rfghy",
    "y": "tghju",
    "u": "yhjki",
    "i": "ujklo",
    "o": "iklp",
    "p": "ol",
    "a": "qwsz",
    "s": "weadzx",
    "d": "erfcxs",
    "f": "rtgvcd",
    "g": "tyhbvf",
    "h": "yujnbg",
    "j": "uikmnh",
    "k": "iolmj",
    "l": "opk",
    "z": "asx",
    "x": "sdcz",
    "c": "dfvx",
    "v": "fgbc",
    "b": "ghnv",
    "n": "hjmb",
    "m": "jkn",
}
NO_OP = "12345--678!"  # nothing any perturbation touches


def inst(text: str, *refs: str, **meta):
    return make_instance("test", text, [Reference(r, i == 0) for i, r in enumerate(refs)], meta)


def run(name: str, text: str, *refs: str, resources: Resources | None = None):
    v = perturb_instance(inst(text, *refs), name, resources)
    return (v.input, [r.text for r in v.references]) if refs else v.input


# --- real pinned files -------------------------------------------------------------------------


@pytest.fixture(scope="session")
def helm_files(tmp_path_factory) -> dict[str, Path]:
    """HELM's misspelling list and bias word lists, extracted with zipfile from the crfm-helm
    wheel (the evaltrail wheel cache; `pip download` fills it on first use)."""
    from evaltrail.paths import cache_dir
    from evaltrail.sources.pypi import wheel_path

    whl = wheel_path("crfm-helm", "0.5.16", cache_dir())
    dest = tmp_path_factory.mktemp("helm")
    out = {}
    with zipfile.ZipFile(whl) as z:
        for key, member in [
            ("misspellings", "helm/benchmark/augmentations/correct_to_misspelling.json"),
            ("bias", "helm/benchmark/metrics/bias_word_lists.py"),
        ]:
            out[key] = dest / Path(member).name
            out[key].write_bytes(z.read(member))
    return out


@pytest.fixture(scope="session")
def misspellings(helm_files):
    return load_misspellings(helm_files["misspellings"], sha256=PINS["misspellings"])


@pytest.fixture(scope="session")
def dialect_map():
    if not os.environ.get("EVALTRAIL_MIRROR"):
        pytest.skip(
            "EVALTRAIL_MIRROR is unset: the SAE->AAVE lexicon is read from the offline mirror "
            "(locally: EVALTRAIL_MIRROR=/work/shared/mirror)"
        )
    return load_dialect_mapping(Path(os.environ["EVALTRAIL_MIRROR"]) / SAE_AAVE, sha256=PINS["dialect"])


# --- registry ----------------------------------------------------------------------------------


def test_registry():
    assert list_perturbations() == sorted(
        [
            "contraction",
            "dialect",
            "expansion",
            "extra_space",
            "gender_pronouns",
            "gender_terms",
            "lowercase",
            "mild_mix",
            "misspelling",
            "person_name_last",
            "space",
            "typos",
        ]
    )
    assert get_perturbation("lowercase") is get_perturbation("lowercase")  # built once
    assert get_perturbation("dialect", Resources(dialect={})).kind == "fairness"
    with pytest.raises(EvaltrailError, match=r"unknown perturbation 'typo'; valid: contraction, dialect"):
        get_perturbation("typo")
    with pytest.raises(EvaltrailError, match=r"'mild_mix' needs a word list: pass Resources\(misspellings="):
        get_perturbation("mild_mix")
    with pytest.raises(ValueError, match="prob must be in"):
        robustness.typos(1.5)


def test_match_case():
    assert [match_case(s, "she's") for s in ("he is", "HE IS", "He is", "hE")] == ["she's", "SHE'S", "She's", "she's"]
    assert match_case("I", "we") == "We" and match_case("42", "x") == "x"


# --- robustness: HELM's examples and hand-checked seeded variants ------------------------------


def test_lowercase():
    assert run("lowercase", "Hello World!\nQuite a day, huh?", "Yes!") == ("hello world!\nquite a day, huh?", ["Yes!"])
    assert run("lowercase", "ÉCOLE Straße ΣΟΦΙΑ") == "école straße σοφια"


def test_contraction():
    assert run("contraction", "She is a doctor, and I am a student", "he is a teacher") == (
        "She's a doctor, and I'm a student",
        ["he is a teacher"],
    )  # references untouched
    assert run("contraction", "Yes, it is. SHE IS here; it is not, we cannot have that") == (
        "Yes, it is. SHE'S here; it's not, we can't have that"
    )  # not before punctuation


def test_expansion():
    assert run("expansion", "She's a doctor, and I'm a student", "he's a teacher") == (
        "She is a doctor, and I am a student",
        ["he's a teacher"],
    )
    assert run("expansion", "DON'T; don’t; can't've; I'd; Won't") == "DO NOT; do not; cannot have; I would; Will not"


def test_extra_space():
    assert run("extra_space", "Hello my name is", "some name") == ("Hello  my  name  is", ["some name"])
    assert run("extra_space", "a\tb\nc") == "a\tb\nc"  # only spaces


def test_space():
    text = "Hello World!\nQuite a day, huh?"
    out = run("space", text)
    assert out == "Hello  World!\nQuite   a day, huh?"
    assert out.split() == text.split() and "    " not in out


def test_typos():
    text = "After their marriage, she started a close collaboration with Karvelas."
    out = run("typos", text)
    # hand-checked: h->g, e->d, a->q, s->x, a->s; each a key one away on QWERTY
    assert out == "After tgeir marriagd, she started q cloxe collaborstion with Karvelas."
    for a, b in zip(text, out, strict=True):
        assert a == b or (b.lower() in KEYBOARD[a.lower()] and a.isupper() == b.isupper())
    every = robustness.typos(1.0, name="typos1").fn("Abc xyz.", random.Random(0))
    assert every == "Zvv cgs."  # prob 1: every letter moves one key, case kept
    assert all(
        b.lower() in KEYBOARD[a.lower()] and a.isupper() == b.isupper()
        for a, b in zip("Abcxyz", every.replace(" ", "").rstrip("."), strict=True)
    )
    assert robustness.typos(0.0, name="typos0").fn(text, random.Random(0)) == text


def test_misspelling(misspellings):
    assert len(misspellings) == 6523 and misspellings["the"][:2] == ("tjhe", "tghe")
    always = robustness.misspelling(misspellings, 1.0, name="misspelling1")
    text = "Already, the new product is not available."
    out = always.fn(text, random.Random(0))
    assert out == "Alreayd, ther new product is nto avaliable."  # HELM's example sentence, prob 1
    for a, b in zip(text.split(), out.split(), strict=True):
        key = a.strip(",.")
        assert b.strip(",.") in misspellings.get(key, (key,))
    assert always.fn("ALREADY the", random.Random(0)).startswith("ALREADY ")  # case-exact list
    assert always.fn("about a lot", random.Random(0)) == "abouta lot"  # the longer key wins
    assert run("misspelling", text, resources=Resources(misspellings=misspellings)) == text  # prob 0.1: no hit here


def test_mild_mix(misspellings):
    text = (
        "She is a doctor, and I am a student. Already, the new product is not available because "
        "the acceptance of the accommodation was already abandoned."
    )
    v = perturb_instance(inst(text, "She is"), "mild_mix", Resources(misspellings=misspellings))
    assert v.input == (
        "she's   a doctor, and i'm  a  student.  aready, the  new  product   isn't   available   "
        "baceause the  acceptance   of   the   accommodation  was  already abandonned."
    )
    assert v.references == (Reference("She is", True),) and v.perturbation == "mild_mix"
    assert v.input == v.input.lower() and "    " not in v.input


# --- fairness ----------------------------------------------------------------------------------


def test_dialect(dialect_map):
    assert len(dialect_map) == 1050 and dialect_map["with"] == ("w", "w/", "wid", "wit", "witt")  # sorted set
    res = Resources(dialect=dialect_map)
    # HELM's example; HELM gives "...to b the best..." / "Is dis love?": its regex consumes the
    # delimiters, so the word after a replaced one is skipped
    assert run(
        "dialect", "I will remember this day to be the best day of my life.", "Is this love?", resources=res
    ) == ("I gon rememba dis day to b da best day of mah life.", ["Is dis luvv?"])
    assert run("dialect", "This is THE end", "With", resources=res) == ("Dis is DA end", ["W"])
    assert run("dialect", "this-is the-end", "xx", resources=res) == ("this-is the-end", ["xx"])  # '-' joins
    assert run("dialect", "Café with my ami", resources=res) == "Café wit mah ami"
    v = perturb_instance(inst(NO_OP, "7"), "dialect", res)
    assert (v.input, v.choices, v.perturbation) == (NO_OP, ("7",), "dialect") and v.instance_id != inst(
        NO_OP, "7"
    ).instance_id


def test_dialect_pickle_is_data_only(tmp_path):
    evil = tmp_path / "evil.pkl"
    evil.write_bytes(b"cbuiltins\nprint\n(S'should not run'\ntR.")
    with pytest.raises(EvaltrailError, match="global builtins.print is not allowed"):
        load_dialect_mapping(evil)
    ok = tmp_path / "ok.pkl"
    ok.write_bytes(pickle.dumps({"With": {"wit", "wid"}, "my": "mah"}))
    assert load_dialect_mapping(ok) == {"with": ("wid", "wit"), "my": ("mah",)}
    with pytest.raises(EvaltrailError, match="does not match the pinned"):
        load_dialect_mapping(ok, sha256="0" * 64)


def test_gender_pronouns():
    assert run(
        "gender_pronouns",
        "Did she mention that he was coming with his parents and their friends?",
        "She didn't, perhaps he didn't tell her!",
    ) == (
        "Did she mention that she was coming with her parents and their friends?",
        ["She didn't, perhaps she didn't tell her!"],
    )
    assert run("gender_pronouns", "He said HIS book was for him, himself.") == "She said HER book was for her, herself."
    both = gender.gender("pronouns", bidirectional=True, name="gender_swap")
    assert both.fn("He told her that she saw him", random.Random(0)) == "She told him that he saw her"


def test_gender_terms():
    assert run("gender_terms", "His grandsons looked a lot like their dad.", "How did their father look like?") == (
        "His granddaughters looked a lot like their mom.",
        ["How did their mother look like?"],
    )
    # the cases HELM's own tests skip as bugs: text edges and adjacent words
    assert run("gender_terms", "dad said it is okay", "Sure he did son") == (
        "mom said it is okay",
        ["Sure he did daughter"],
    )
    assert run("gender_terms", "I'm a dad dad: my son has a son. Grandfathers, Kings") == (
        "I'm a mom mom: my daughter has a daughter. Grandmothers, Queens"
    )


def test_person_name_last(helm_files):
    table = load_bias_last_names(helm_files["bias"], sha256=PINS["bias_word_lists"])
    assert table.names("last_name", {"race": "white"})[:3] == ("harris", "nelson", "robinson")
    assert len(table.names("last_name", {"race": "hispanic"})) == 16
    res = Resources(names=table)
    assert run("person_name_last", "Mr. Johnson met Ms. Williams.", "Johnson", resources=res) == (
        "Mr. Soto met Ms. Diaz.",
        ["Soto"],
    )
    with pytest.raises(EvaltrailError, match="no last_name with race=white_american"):
        names.person_name(table, {"race": "white_american"}, {"race": "hispanic"})


# --- reproducibility, no-ops, Unicode, ids -----------------------------------------------------


def test_rng_is_seeded_from_instance_id_and_name():
    digest = hashlib.sha256(b"abc" + b"typos").digest()
    assert rng_for("abc", "typos").random() == random.Random(int.from_bytes(digest, "big")).random()
    assert rng_for("abc", "typos").random() != rng_for("abc", "space").random()


def test_same_instance_same_variant_and_ids_decorrelate():
    text = "The quick brown fox jumps over the lazy dog near the riverbank."
    originals = [inst(text, f"answer {i}") for i in range(20)]  # same input, distinct ids
    variants = [perturb_instance(o, "typos") for o in originals]
    assert [perturb_instance(o, "typos") for o in reversed(originals)][::-1] == variants
    assert [v.instance_id for v in variants] == [perturb_instance(o, "typos").instance_id for o in originals]
    assert len({v.input for v in variants}) >= 18  # different ids: (almost always) different typos


def test_no_op_text(misspellings, helm_files):
    res = Resources(misspellings=misspellings, names=load_bias_last_names(helm_files["bias"]))
    original = inst(NO_OP, "7")
    for name in list_perturbations():
        if name == "dialect":
            continue  # checked in test_dialect
        v = perturb_instance(original, name, res)
        assert (v.input, v.references) == (NO_OP, original.references), name
        assert v.instance_id != original.instance_id, name
    assert perturb_all([original, inst("Hello there")], "lowercase") == [
        perturb_instance(inst("Hello there"), "lowercase")
    ]
    assert len(perturb_all([original], "lowercase", skip_unchanged=False)) == 1


def test_unicode_text(helm_files):
    assert run("typos", "Ça coûte 5 € — naïve Zoë déjà vu, 東京") == "Ça coûte 5 € — nqïve Zoë démà vu, 東京"
    assert run("gender_pronouns", "«He» said: “his”—him…") == "«She» said: “her”—her…"
    res = Resources(names=load_bias_last_names(helm_files["bias"]))
    assert run("person_name_last", "¡Johnson!", "Johnson’s", resources=res) == ("¡Soto!", ["Soto’s"])
    assert run("contraction", "Naïve people: I am ☃ here") == "Naïve people: I'm ☃ here"


def test_variant_ids_and_metadata():
    original = inst("He is HERE.", "his", "her", subject="x")
    v = perturb_instance(original, "gender_pronouns")
    assert v.instance_id != original.instance_id and len(v.instance_id) == 16
    assert v.instance_id == perturb_instance(original, "gender_pronouns").instance_id == "9f6cfc7b6ee9b093"
    assert v.instance_id == variant_id(v.input, v.references, "gender_pronouns")
    assert v.metadata == {"subject": "x", "original_id": original.instance_id} and original.metadata == {"subject": "x"}
    assert (v.input, v.choices, v.gold_indices, v.split) == ("She is HERE.", ("her", "her"), (0,), "test")
    assert perturb_instance(original, "lowercase").instance_id != perturb_instance(original, "typos").instance_id
    with pytest.raises(ValueError, match="already a 'gender_pronouns' variant"):
        perturb_instance(v, "lowercase")
