"""Tiny builders for decoding tests: hand-made CTC output matrices."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

# The LM knows "cat" and "dog" after "the", never "cot".
LM_CORPUS = "\n".join(
    [
        "the cat sat on the mat",
        "the cat sat",
        "the dog sat on the log",
        "a cat ate the fish",
        "the dog ate",
    ]
)


def log_probs_from_rows(rows: Sequence[Mapping[int, float]], vocab_size: int) -> Tensor:
    """(T, V) float64 log-probs, one frame per row.

    A row gives the probability of some outputs; the rest of the frame's mass is shared evenly by the
    outputs it does not name (so a row naming every output with mass summing to 1 is used as is, and a row
    whose named mass is 1 gives the others probability 0, i.e. log-prob -inf).
    """
    probs = torch.zeros(len(rows), vocab_size, dtype=torch.float64)  # (T, V)
    for t, row in enumerate(rows):
        unnamed = vocab_size - len(row)
        rest = 1.0 - sum(row.values())
        assert rest > -1e-9, f"row {t} has more than probability 1: {row}"
        if unnamed:
            probs[t] = max(rest, 0.0) / unnamed
        for token, prob in row.items():
            probs[t, token] = prob
    return probs.log()


def spelled_rows(tokens: Sequence[int | Mapping[int, float]], blank_id: int, peak: float = 0.9) -> list[dict]:
    """Rows for a clean spelling: each token gets a frame where it has probability ``peak``, then a blank
    frame. An entry may instead be a mapping (an acoustically ambiguous frame) used verbatim."""
    rows: list[dict] = []
    for token in tokens:
        rows.append(dict(token) if isinstance(token, Mapping) else {token: peak})
        rows.append({blank_id: peak})
    return rows


def peaky_log_probs(batch: int, frames: int, vocab_size: int, seed: int, sharpness: float = 6.0) -> Tensor:
    """(B, T, V) random log-softmax outputs where each frame has one clear winner, as a trained CTC model
    gives: random logits plus ``sharpness`` on a random output (the blank, 0, half of the time)."""
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, frames, vocab_size, generator=generator)  # (B, T, V)
    winners = torch.randint(0, vocab_size, (batch, frames), generator=generator)  # (B, T)
    blank_frames = torch.rand(batch, frames, generator=generator) < 0.5
    winners[blank_frames] = 0
    logits.scatter_add_(-1, winners[..., None], torch.full((batch, frames, 1), sharpness))
    return logits.log_softmax(dim=-1)


def ambiguous_cat_or_cot(tokenizer) -> torch.Tensor:
    """ "the c?t sat" where the vowel frame slightly prefers "o" (0.5) over "a" (0.4)."""
    ids = tokenizer.encode("the cat sat")
    a, o = tokenizer.encode("a")[-1], tokenizer.encode("o")[-1]
    vowel = ids.index(a)
    spelled = [*ids[:vowel], {o: 0.5, a: 0.4}, *ids[vowel + 1 :]]
    return log_probs_from_rows(spelled_rows(spelled, tokenizer.blank_id), tokenizer.vocab_size)
