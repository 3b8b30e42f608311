"""Deliberate mispronunciations with known labels: the errors a learner makes, and SpeechOcean762-style scores.

One error per mispronounced word, of a kind drawn by weight:

    near        a phone replaced by a close one a learner confuses it with (IY/IH, TH/S, L/R, ...): that phone
                scores 1 (accented)
    far         a phone replaced by one of the other class (a vowel for a consonant or back): it scores 0
    deletion    a phone left out (words of two or more phones): it scores 0
    insertion   a schwa added after a consonant (an epenthesis, "sp-" -> "sup-"): every phone scores 2, and
                the word loses points for the extra sound

Phone scores follow SpeechOcean762: 2 right, 1 accented, 0 wrong or missing. A word's accuracy is 10 x the
mean phone score / 2, minus 3 for an insertion (at least 0); an utterance's accuracy is the mean of its words'.
Stress digits ride along on the spoken phones so espeak-ng stresses the right syllable (``pron.espeak_phones``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from asr_pipeline.pron.espeak_phones import VOWELS
from asr_pipeline.text.phones import ARPABET, strip_stress

# Confusions of English learners, both ways (vowel length and quality, TH-stopping and -fronting, L/R, voicing).
NEAR_PAIRS = (
    ("IY", "IH"), ("EH", "AE"), ("AA", "AO"), ("UW", "UH"), ("AH", "AA"), ("EY", "EH"), ("OW", "AO"),
    ("S", "Z"), ("F", "V"), ("T", "D"), ("P", "B"), ("K", "G"), ("TH", "S"), ("DH", "D"), ("SH", "S"),
    ("CH", "SH"), ("JH", "ZH"), ("L", "R"), ("M", "N"), ("N", "NG"), ("W", "V"),
)  # fmt: skip
NEAR: dict[str, tuple[str, ...]] = {}
for _a, _b in NEAR_PAIRS:
    NEAR[_a] = (*NEAR.get(_a, ()), _b)
    NEAR[_b] = (*NEAR.get(_b, ()), _a)
ERROR_KINDS = ("near", "far", "deletion", "insertion")
INSERTION_PENALTY = 3.0


@dataclass(frozen=True)
class SpokenWord:
    """What was said for one canonical word, and how each canonical phone is scored."""

    text: str
    canonical: tuple[str, ...]  # stress-free
    spoken: tuple[str, ...]  # with stress digits, for espeak-ng
    phone_scores: tuple[float, ...]  # one per canonical phone: 2, 1 or 0
    error: str | None  # an ERROR_KINDS name, None when said right
    insertions: int = 0

    @property
    def accuracy(self) -> float:
        mean = sum(self.phone_scores) / len(self.phone_scores)
        return max(0.0, 10.0 * mean / 2.0 - INSERTION_PENALTY * self.insertions)


def say(text: str, phones: Sequence[str], error: str | None, rng: random.Random) -> SpokenWord:
    """``phones`` (CMUdict's, with stress) said right, or with one error of kind ``error`` (module docstring).
    An error the word cannot take (no phone with a near partner, one phone to delete, no consonant to follow
    with a schwa) falls back to a far substitution, which every word can take."""
    canonical = tuple(strip_stress(p) for p in phones)
    spoken, scores = list(phones), [2.0] * len(phones)
    if error is None:
        return SpokenWord(text, canonical, tuple(spoken), tuple(scores), None)
    if error == "near":
        candidates = [i for i, p in enumerate(canonical) if p in NEAR]
        if candidates:
            i = rng.choice(candidates)
            spoken[i] = _with_stress(rng.choice(NEAR[canonical[i]]), phones[i])
            scores[i] = 1.0
            return SpokenWord(text, canonical, tuple(spoken), tuple(scores), "near")
    if error == "deletion" and len(phones) >= 2:
        i = rng.randrange(len(phones))
        del spoken[i]
        scores[i] = 0.0
        return SpokenWord(text, canonical, tuple(spoken), tuple(scores), "deletion")
    if error == "insertion":
        consonants = [i for i, p in enumerate(canonical) if p not in VOWELS]
        if consonants:
            i = rng.choice(consonants)
            spoken.insert(i + 1, "AH0")
            return SpokenWord(text, canonical, tuple(spoken), tuple(scores), "insertion", insertions=1)
    i = rng.randrange(len(phones))  # far: the other class, never the phone's near partners
    other = [
        p
        for p in ARPABET
        if (p in VOWELS) != (canonical[i] in VOWELS) and p not in NEAR.get(canonical[i], ())
    ]
    spoken[i] = _with_stress(rng.choice(other), phones[i])
    scores[i] = 0.0
    return SpokenWord(text, canonical, tuple(spoken), tuple(scores), "far")


def _with_stress(phone: str, original: str) -> str:
    """``phone`` with ``original``'s stress when it is a vowel (a consonant has none)."""
    if phone not in VOWELS:
        return phone
    digit = original[-1] if original[-1] in "012" else "1"
    return phone + digit


__all__ = ["ERROR_KINDS", "NEAR", "SpokenWord", "say"]
