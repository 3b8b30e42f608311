"""text.phones: 39 ARPABET phones without stress after the blank and silence, ids documented and dense."""

from __future__ import annotations

import pytest

from asr_pipeline.text.phones import (
    ARPABET,
    BLANK_ID,
    ID_PHONES,
    NUM_CLASSES,
    PHONE_IDS,
    SILENCE_ID,
    phone_ids,
)


def test_the_ids_are_blank_silence_then_the_39_phones_in_order():
    assert (BLANK_ID, SILENCE_ID, NUM_CLASSES, len(ARPABET)) == (0, 1, 41, 39)
    assert [ID_PHONES[i] for i in range(4)] == ["<blank>", "SIL", "AA", "AE"] and PHONE_IDS["ZH"] == 40
    assert sorted(ID_PHONES) == list(range(NUM_CLASSES))


def test_stress_is_removed_and_an_unknown_phone_is_named():
    assert phone_ids(["S", "P", "IY1", "CH"]) == phone_ids(["S", "P", "IY0", "CH"]) == [30, 28, 19, 9]
    with pytest.raises(ValueError, match="'QX1' is not an ARPABET phone"):
        phone_ids(["QX1"])
