"""The few-step CTC overfit every model test runs: the same loop, the model and its batch passed in."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def ctc_overfit_losses(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: tuple[Tensor, Tensor, Tensor, Tensor],
    steps: int,
) -> list[float]:
    """The CTC loss of each of ``steps`` optimizer steps on one ``(features, lengths, targets,
    target_lengths)`` batch."""
    features, lengths, targets, target_lengths = batch
    losses = []
    for _ in range(steps):
        log_probs, out_lengths = model(features, lengths)  # (B, T', V), (B,)
        loss = F.ctc_loss(log_probs.transpose(0, 1), targets, out_lengths, target_lengths)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses
