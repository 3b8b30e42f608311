"""pron.mispronounce: each kind of error changes what is said the way its name says and scores the canonical
phones as SpeechOcean762 does; an error a word cannot take becomes a far substitution."""

from __future__ import annotations

import random

import pytest

from asr_pipeline.pron.espeak_phones import VOWELS
from asr_pipeline.pron.mispronounce import NEAR, say

THINK = ["TH", "IH1", "NG", "K"]


def test_said_right_every_phone_scores_2_and_the_word_10():
    word = say("think", THINK, None, random.Random(0))
    assert word.spoken == tuple(THINK) and word.phone_scores == (2.0,) * 4 and word.accuracy == 10.0


@pytest.mark.parametrize("seed", range(5))
def test_a_near_substitution_swaps_a_phone_for_its_partner_and_scores_it_1(seed):
    word = say("think", THINK, "near", random.Random(seed))

    [changed] = [i for i, (a, b) in enumerate(zip(THINK, word.spoken, strict=True)) if a != b]
    assert word.spoken[changed].rstrip("012") in NEAR[word.canonical[changed]]
    assert word.phone_scores[changed] == 1.0 and word.accuracy == pytest.approx(10 * (7 / 8) / 2 * 2)


@pytest.mark.parametrize("seed", range(5))
def test_a_far_substitution_crosses_vowel_and_consonant_and_scores_it_0(seed):
    word = say("think", THINK, "far", random.Random(seed))

    [changed] = [i for i, (a, b) in enumerate(zip(THINK, word.spoken, strict=True)) if a != b]
    assert (word.spoken[changed].rstrip("012") in VOWELS) != (word.canonical[changed] in VOWELS)
    assert word.phone_scores[changed] == 0.0 and word.error == "far"


def test_a_deletion_drops_a_phone_and_an_insertion_adds_a_schwa_after_a_consonant():
    deleted = say("think", THINK, "deletion", random.Random(1))
    assert len(deleted.spoken) == 3 and deleted.phone_scores.count(0.0) == 1 and deleted.accuracy == 7.5

    inserted = say("think", THINK, "insertion", random.Random(1))
    position = inserted.spoken.index("AH0")
    assert inserted.spoken[position - 1].rstrip("012") not in VOWELS and len(inserted.spoken) == 5
    assert inserted.phone_scores == (2.0,) * 4 and inserted.accuracy == 7.0  # 10 - 3 for the extra sound


def test_an_error_the_word_cannot_take_becomes_a_far_substitution():
    one_phone = say("a", ["AH0"], "deletion", random.Random(0))  # nothing left to delete
    assert one_phone.error == "far" and one_phone.phone_scores == (0.0,)
    no_consonant = say("oh", ["OW1"], "insertion", random.Random(0))
    assert no_consonant.error == "far"
