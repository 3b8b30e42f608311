"""Transcript normalization, applied identically to training text, the LM corpus and references."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from asr_pipeline.options import options_from_dict

_PUNCTUATION = re.compile(r"[^\w\s']|_", flags=re.UNICODE)
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class NormalizationOptions:
    unicode_form: str | None = "NFKC"  # NFKC folds full-width and compatibility characters
    lowercase: bool = True
    strip_punctuation: bool = True  # keeps apostrophes: "don't" stays one word

    @classmethod
    def from_dict(cls, values: dict | None) -> NormalizationOptions:
        return options_from_dict(cls, values, "params.yaml transcripts.normalization")


def normalize_text(text: str, options: NormalizationOptions = NormalizationOptions()) -> str:
    if options.unicode_form:
        text = unicodedata.normalize(options.unicode_form, text)
    if options.lowercase:
        text = text.lower()
    if options.strip_punctuation:
        text = _PUNCTUATION.sub(" ", text)
        text = " ".join(word.strip("'") for word in text.split())
    return _SPACES.sub(" ", text).strip()
