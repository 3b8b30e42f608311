"""Greedy (best-path) CTC decoding.

Dimension legend: B batch, T frames, V vocabulary (CTC outputs, blank included).

The best path takes the most probable output in every frame; its labelling is obtained by the CTC
collapse rule (Graves et al., 2006): merge runs of the same output, then drop blanks. A blank between
two equal outputs therefore keeps both ("a _ a" -> "a a"), while "a a" -> "a".
"""

from __future__ import annotations

import torch
from torch import Tensor


def greedy_decode(
    log_probs: Tensor, lengths: Tensor, blank_id: int = 0, collapse: bool = True
) -> list[list[int]]:
    """Best-path labellings of a batch.

    Args:
        log_probs: (B, T, V) frame scores; any monotone transform of the probabilities works since only
            the argmax is used (log-softmax outputs, logits, probabilities).
        lengths: (B,) number of valid frames per utterance; frames past it are padding and ignored.
        blank_id: the CTC blank output.
        collapse: the CTC rule; False for per-token posteriors (a Paraformer decoder's (B, U, V), one
            position per token): every position's argmax is kept, repeats included (blanks still dropped).

    Returns:
        One list of model ids per utterance (blank-free, repeats collapsed unless ``collapse`` is False).
    """
    if log_probs.dim() != 3:
        raise ValueError(f"log_probs must be (B, T, V), got shape {tuple(log_probs.shape)}")
    batch, frames, vocab = log_probs.shape
    if lengths.shape != (batch,):
        raise ValueError(f"lengths must be (B,) = ({batch},), got shape {tuple(lengths.shape)}")
    if not 0 <= blank_id < vocab:
        raise ValueError(f"blank_id={blank_id} is outside the vocabulary of {vocab} outputs")
    if batch and (int(lengths.min()) < 0 or int(lengths.max()) > frames):
        raise ValueError(f"lengths must lie in [0, T={frames}], got {lengths.tolist()}")

    best = log_probs.argmax(dim=-1)  # (B, T)
    # A frame starts a new output when it differs from the previous frame; frame 0 always does.
    starts_run = torch.ones_like(best, dtype=torch.bool)  # (B, T)
    if collapse:
        starts_run[:, 1:] = best[:, 1:] != best[:, :-1]
    valid = torch.arange(frames, device=best.device) < lengths.to(best.device)[:, None]  # (B, T)
    keep = starts_run & (best != blank_id) & valid  # (B, T)

    best, keep = best.cpu(), keep.cpu()
    return [best[b][keep[b]].tolist() for b in range(batch)]


__all__ = ["greedy_decode"]
