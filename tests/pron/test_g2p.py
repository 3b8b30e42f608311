"""pron.g2p: each fallback stage on a word only it can answer (a small dictionary makes the cases), the order of
the chain, normalization, and the report that counts every stage."""

from __future__ import annotations

import pytest

from asr_pipeline.pron.g2p import G2P, normalize_word, number_words, ordinal_words

WORDS = {
    "cat": [["K", "AE1", "T"]], "judge": [["JH", "AH1", "JH"]], "dog": [["D", "AO1", "G"]],
    "well": [["W", "EH1", "L"]], "known": [["N", "OW1", "N"]], "sun": [["S", "AH1", "N"]],
    "beam": [["B", "IY1", "M"]], "zoom": [["Z", "UW1", "M"]], "blog": [["B", "L", "AO1", "G"]],
    "hop": [["HH", "AA1", "P"]], "happy": [["HH", "AE1", "P", "IY0"]], "bake": [["B", "EY1", "K"]],
    "want": [["W", "AA1", "N", "T"]], "forty": [["F", "AO1", "R", "T", "IY0"]], "two": [["T", "UW1"]],
    "one": [["W", "AH1", "N"]], "thousand": [["TH", "AW1", "Z", "AH0", "N", "D"]], "third": [["TH", "ER1", "D"]],
    "twenty": [["T", "W", "EH1", "N", "T", "IY0"]], "first": [["F", "ER1", "S", "T"]],
}  # fmt: skip


def oracle(word: str) -> list[str]:
    return ["N", "UW1"] if word else []  # what a letter-to-sound model would guess: fixed, so tests can tell


@pytest.fixture
def g2p() -> G2P:
    return G2P(WORDS, letter_to_sound=oracle)


@pytest.mark.parametrize(
    ("word", "phones", "stage"),
    [
        ("Cat,", "K AE T", "dictionary"),  # normalized, stress removed
        ("cat's", "K AE T S", "possessive"),  # voiceless: S
        ("judge's", "JH AH JH IH Z", "possessive"),  # sibilant: IH Z
        ("dog's", "D AO G Z", "possessive"),  # voiced: Z
        ("dogs'", "D AO G Z", "possessive"),  # the plural owner, itself through the chain (suffix)
        ("well-known", "W EH L N OW N", "hyphen"),
        ("42", "F AO R T IY T UW", "number"),
        ("1,000", "W AH N TH AW Z AH N D", "number"),
        ("3rd", "TH ER D", "number"),
        ("21st", "T W EH N T IY F ER S T", "number"),
        ("sunbeam", "S AH N B IY M", "compound"),
        ("zoomed", "Z UW M D", "suffix"),  # -ed after a voiced consonant: D
        ("wanted", "W AA N T IH D", "suffix"),  # after T: IH D
        ("hopped", "HH AA P T", "suffix"),  # doubled consonant undone; after P: T
        ("baked", "B EY K T", "suffix"),  # the silent e restored
        ("happiness", "HH AE P IY N AH S", "suffix"),  # i back to y
        ("bloggers", "B L AO G ER Z", "suffix"),
        ("kedro", "N UW", "letter_to_sound"),
        ("b2b", "B IY T UW B IY", "spelled"),
        ("%", "", "unresolved"),
    ],
)
def test_each_word_is_answered_by_the_first_stage_that_knows_it(g2p, word, phones, stage):
    resolved, answered_by = g2p.resolve(word)

    assert answered_by == stage
    if phones is not None:
        assert resolved == phones.split()


def test_the_report_counts_each_stage_with_examples(g2p):
    for word in ["the", "cat's", "42", "well-known", "cat", "kedro", "%"]:
        g2p.word(word)

    report = g2p.report.to_dict()
    assert report["words"] == 7
    assert report["by_stage"] == {"dictionary": 1, "possessive": 1, "hyphen": 1, "number": 1,
                                  "letter_to_sound": 2, "unresolved": 1}  # fmt: skip
    assert (
        report["examples"]["letter_to_sound"] == ["the", "kedro"] and "dictionary" not in report["examples"]
    )
    assert report["dictionary_share"] == pytest.approx(1 / 7)


def test_sentences_split_on_white_space_and_keep_every_word(g2p):
    assert g2p.sentence("A cat's   dog") == [
        ("A", ["N", "UW"]),
        ("cat's", ["K", "AE", "T", "S"]),
        ("dog", ["D", "AO", "G"]),
    ]


def test_normalization_and_number_words():
    assert [normalize_word(w) for w in ["\u201cCafé\u201d", "dogs'", "'quoted'", "it\u2019s"]] == [
        "cafe", "dogs'", "quoted", "it's",
    ]  # fmt: skip
    assert number_words(1042) == ["one", "thousand", "forty", "two"]
    assert number_words(2_000_015) == ["two", "million", "fifteen"]
    assert ordinal_words(number_words(12)) == ["twelfth"] and ordinal_words(["twenty"]) == ["twentieth"]


def test_the_real_cmudict_answers_common_words_from_the_dictionary():
    g2p = G2P()

    assert g2p.resolve("speech") == (["S", "P", "IY", "CH"], "dictionary")
    assert g2p.resolve("moonwalkers")[1] in ("dictionary", "compound", "suffix")


def test_an_inflection_is_tried_before_a_compound_split():
    words = {**WORDS, "decorate": [["D", "EH1", "K", "ER0", "EY2", "T"]], "deco": [["D", "EH1", "K", "OW0"]],
             "rates": [["R", "EY1", "T", "S"]]}  # fmt: skip
    g2p = G2P(words, letter_to_sound=oracle)

    assert g2p.resolve("decorates") == (["D", "EH", "K", "ER", "EY", "T", "S"], "suffix")
