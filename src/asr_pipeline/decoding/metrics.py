"""Word and character error rates, pooled over a corpus.

Rates are corpus-level: the errors of every utterance are summed and divided by the total number of
reference units, then multiplied by 100. Averaging per-utterance rates instead would let a one-word
utterance weigh as much as a fifty-word one.

Units:
    words  -- the text split on any run of whitespace.
    chars  -- the characters of the text after whitespace is normalised to single spaces and stripped
              at both ends; the spaces between words count as characters (the convention of most ASR
              toolkits, so a missed word boundary costs one character error).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


def edit_distance(ref: Sequence, hyp: Sequence) -> int:
    """Levenshtein distance (unit-cost substitutions, insertions and deletions) between two sequences.

    Elements are compared with ``==``, so this works on strings (characters), lists of words or lists of
    token ids. Keeps only two rows of the dynamic programme, O(min(len(ref), len(hyp))) memory.
    """
    # The distance is symmetric, so put the shorter sequence along the row to keep the rows small.
    if len(hyp) > len(ref):
        ref, hyp = hyp, ref
    previous = list(range(len(hyp) + 1))
    for i, ref_item in enumerate(ref, start=1):
        current = [i] + [0] * len(hyp)
        for j, hyp_item in enumerate(hyp, start=1):
            current[j] = min(
                previous[j] + 1,  # ref_item has no partner in hyp
                current[j - 1] + 1,  # hyp_item has no partner in ref
                previous[j - 1] + (ref_item != hyp_item),  # paired: free when equal
            )
        previous = current
    return previous[-1]


@dataclass(frozen=True)
class ErrorRates:
    """Corpus-level error rates in percent, with the counts they came from (for pooling across runs)."""

    wer: float
    cer: float
    words: int
    chars: int
    word_errors: int
    char_errors: int


def _normalise_spaces(text: str) -> str:
    return " ".join(text.split())


def error_rates(references: Sequence[str], hypotheses: Sequence[str]) -> ErrorRates:
    """WER and CER (percent) of ``hypotheses`` against ``references``, paired by position.

    Raises ValueError when the two sequences differ in length (a dropped utterance would otherwise shift
    every later pair) or when the references hold no words at all (the rates are undefined).
    """
    if len(references) != len(hypotheses):
        raise ValueError(
            f"error_rates got {len(references)} references but {len(hypotheses)} hypotheses; "
            "they are paired by position, so pass exactly one hypothesis per reference"
        )
    words = chars = word_errors = char_errors = 0
    for reference, hypothesis in zip(references, hypotheses, strict=True):
        ref_words, hyp_words = reference.split(), hypothesis.split()
        ref_chars, hyp_chars = _normalise_spaces(reference), _normalise_spaces(hypothesis)
        words += len(ref_words)
        chars += len(ref_chars)
        word_errors += edit_distance(ref_words, hyp_words)
        char_errors += edit_distance(ref_chars, hyp_chars)
    if words == 0:
        raise ValueError(
            f"the {len(references)} references contain no words, so WER and CER are undefined; "
            "check that the reference transcripts were loaded (an empty 'text' column?)"
        )
    return ErrorRates(
        wer=100.0 * word_errors / words,
        cer=100.0 * char_errors / chars,
        words=words,
        chars=chars,
        word_errors=word_errors,
        char_errors=char_errors,
    )


__all__ = ["ErrorRates", "edit_distance", "error_rates"]
