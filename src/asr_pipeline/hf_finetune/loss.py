"""Autoregressive cross-entropy over the transcript tokens, and perplexity.

Position i's logits predict token i + 1, so the logits lose their last position and the labels their first
(``collate``: labels hold -100 on the prompt and the padding, which the loss skips). Losses are summed and
divided by the tokens counted, so a batch of long transcripts weighs by its tokens, as a corpus does.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from asr_pipeline.hf_finetune.collate import IGNORE_INDEX


def next_token_loss(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, int]:
    """The summed cross-entropy of ``logits`` (B, L, V) against ``labels`` (B, L), and the tokens it counts.

    In float32 whatever the autocast dtype: a bf16 log-softmax over a 131k vocabulary loses the small
    probabilities the loss is made of."""
    predicted = logits[:, :-1].float()  # (B, L-1, V)
    targets = labels[:, 1:].to(logits.device)  # (B, L-1)
    total = F.cross_entropy(
        predicted.reshape(-1, predicted.shape[-1]),
        targets.reshape(-1),
        ignore_index=IGNORE_INDEX,
        reduction="sum",
    )
    return total, int((targets != IGNORE_INDEX).sum())


def perplexity(loss_per_token: float) -> float:
    """exp(mean cross-entropy per token); inf past float range rather than an OverflowError."""
    return math.exp(loss_per_token) if loss_per_token < 709 else math.inf


__all__ = ["next_token_loss", "perplexity"]
