"""ARPABET to espeak-ng's phoneme mnemonics, so espeak-ng speaks exactly the phones we choose.

espeak-ng reads phonemes between double brackets (``espeak-ng -v en-us "[[h@l'oU]]"``), one mnemonic per
phone, a ``'`` (primary) or ``,`` (secondary) before a stressed vowel. That is how the pronunciation demo set
says a word correctly or with a chosen error: the phones are ours, not espeak-ng's letter-to-sound rules.
Vowels whose sound depends on stress in American English take the stressed or the reduced mnemonic: AH is V
(cup) stressed and @ (about) unstressed, ER is 3: (bird) and 3 (father). ``tests/pron/test_espeak_phones.py``
checks espeak-ng reads every mnemonic back as itself.
"""

from __future__ import annotations

from collections.abc import Sequence

from asr_pipeline.text.phones import strip_stress

ESPEAK = {
    "AA": "A:", "AE": "a", "AH": "V", "AO": "O:", "AW": "aU", "AY": "aI", "B": "b", "CH": "tS", "D": "d",
    "DH": "D", "EH": "E", "ER": "3:", "EY": "eI", "F": "f", "G": "g", "HH": "h", "IH": "I", "IY": "i:",
    "JH": "dZ", "K": "k", "L": "l", "M": "m", "N": "n", "NG": "N", "OW": "oU", "OY": "OI", "P": "p", "R": "r",
    "S": "s", "SH": "S", "T": "t", "TH": "T", "UH": "U", "UW": "u:", "V": "v", "W": "w", "Y": "j", "Z": "z",
    "ZH": "Z",
}  # fmt: skip
REDUCED = {"AH": "@", "ER": "3"}  # unstressed forms
VOWELS = frozenset({"AA", "AE", "AH", "AO", "AW", "AY", "EH", "ER", "EY", "IH", "IY", "OW", "OY", "UH", "UW"})


def to_espeak(phones: Sequence[str]) -> str:
    """One word's ARPABET phones (with CMUdict stress digits, or none: then unstressed) as espeak-ng mnemonics."""
    out = []
    for phone in phones:
        bare, stress = strip_stress(phone), phone[-1] if phone[-1] in "012" else "0"
        if bare in VOWELS:
            mark = {"1": "'", "2": ","}.get(stress, "")
            out.append(mark + (REDUCED.get(bare, ESPEAK[bare]) if stress == "0" else ESPEAK[bare]))
        else:
            out.append(ESPEAK[bare])
    return "".join(out)


def espeak_input(words: Sequence[Sequence[str]]) -> str:
    """A phrase's words (each its phones) as one espeak-ng phoneme input: ``[[w1 w2 ...]]``."""
    return "[[" + " ".join(to_espeak(phones) for phones in words) + "]]"


__all__ = ["ESPEAK", "REDUCED", "VOWELS", "espeak_input", "to_espeak"]
