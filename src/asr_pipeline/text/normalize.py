"""Transcript normalization, applied identically to training text, the LM corpus and references.

The options a tokenizer was trained with are saved next to it (``<prefix>.json``, key ``normalization``);
``normalization_for_model`` reads them back so text meeting that model later is normalized the same way.
"""

from __future__ import annotations

import dataclasses
import json
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from asr_pipeline.options import options_from_dict

_PUNCTUATION = re.compile(r"[^\w\s']|_", flags=re.UNICODE)
_SPACES = re.compile(r"\s+")
UNICODE_FORMS = ("NFKC", "NFC", "NFKD", "NFD")


@dataclass(frozen=True)
class NormalizationOptions:
    unicode_form: str | None = "NFKC"  # NFKC folds full-width and compatibility characters; None: keep
    lowercase: bool = True
    strip_punctuation: bool = True  # keeps apostrophes: "don't" stays one word

    def __post_init__(self) -> None:
        if self.unicode_form is not None and self.unicode_form not in UNICODE_FORMS:
            raise ValueError(
                f"normalization unicode_form must be one of {UNICODE_FORMS} or null, got {self.unicode_form!r}"
            )

    @classmethod
    def from_dict(cls, values: dict | None) -> NormalizationOptions:
        return options_from_dict(cls, values, "params.yaml transcripts.normalization")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def normalize_text(text: str, options: NormalizationOptions = NormalizationOptions()) -> str:
    if options.unicode_form:
        text = unicodedata.normalize(options.unicode_form, text)
    if options.lowercase:
        text = text.lower()
    if options.strip_punctuation:
        text = _PUNCTUATION.sub(" ", text)
        text = " ".join(word.strip("'") for word in text.split())
    return _SPACES.sub(" ", text).strip()


def tokenizer_sidecar(model_path: str | Path) -> Path:
    """``<prefix>.json`` beside ``<prefix>.model``: the summary the tokenizer command and stage write."""
    return Path(model_path).with_suffix(".json")


def normalization_for_model(model_path: str | Path) -> NormalizationOptions:
    """The normalization recorded with a tokenizer model, or the defaults when it has no sidecar.

    Defaults are also what the `transcripts` stage and `asr-pipeline tokenizer` use unless told otherwise,
    so a model trained by another tool without a sidecar gets the project's usual rules.
    """
    sidecar = tokenizer_sidecar(model_path)
    if not sidecar.is_file():
        return NormalizationOptions()
    try:
        recorded = json.loads(sidecar.read_text(encoding="utf-8")).get("normalization")
    except (json.JSONDecodeError, AttributeError) as error:
        raise ValueError(
            f"{sidecar}: not the JSON summary a tokenizer is saved with ({error}); remove it"
        ) from None
    return options_from_dict(NormalizationOptions, recorded, f"{sidecar} normalization")
