"""The phone inventory of the pronunciation models: CMUdict's 39 ARPABET phones without stress, as CTC ids.

    id  0        the CTC blank
    id  1        SIL, silence between words (the aligner's pause class)
    ids 2..40    the phones in ARPABET order:
                 AA AE AH AO AW AY B CH D DH EH ER EY F G HH IH IY JH K L M N NG OW OY P R S SH T TH UH UW V W Y Z ZH

Stress (the digit CMUdict puts on vowels: AH0, AH1, AH2) is removed: a learner's stress is scored apart from the
phone, and the three stresses of a vowel are one sound class for the aligner.
"""

from __future__ import annotations

from collections.abc import Iterable

ARPABET = (
    "AA", "AE", "AH", "AO", "AW", "AY", "B", "CH", "D", "DH", "EH", "ER", "EY", "F", "G", "HH", "IH", "IY", "JH",
    "K", "L", "M", "N", "NG", "OW", "OY", "P", "R", "S", "SH", "T", "TH", "UH", "UW", "V", "W", "Y", "Z", "ZH",
)  # fmt: skip
BLANK, SILENCE = "<blank>", "SIL"
BLANK_ID, SILENCE_ID = 0, 1
PHONE_IDS: dict[str, int] = {SILENCE: SILENCE_ID, **{phone: index + 2 for index, phone in enumerate(ARPABET)}}
ID_PHONES: dict[int, str] = {BLANK_ID: BLANK, **{index: phone for phone, index in PHONE_IDS.items()}}
NUM_CLASSES = len(ID_PHONES)  # 41: blank + silence + 39 phones


def strip_stress(phone: str) -> str:
    """``AH1`` -> ``AH``; a phone without stress comes back as it is. An unknown phone is an error naming it."""
    bare = phone.rstrip("012")
    if bare not in PHONE_IDS:
        raise ValueError(f"{phone!r} is not an ARPABET phone (expected one of {' '.join(ARPABET)}, or SIL)")
    return bare


def phone_ids(phones: Iterable[str]) -> list[int]:
    """CTC ids of ``phones`` (stress removed)."""
    return [PHONE_IDS[strip_stress(phone)] for phone in phones]


__all__ = [
    "ARPABET",
    "BLANK",
    "BLANK_ID",
    "ID_PHONES",
    "NUM_CLASSES",
    "PHONE_IDS",
    "SILENCE",
    "SILENCE_ID",
    "phone_ids",
    "strip_stress",
]
