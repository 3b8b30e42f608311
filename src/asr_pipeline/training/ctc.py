"""The forward pass and per-utterance CTC losses that training and validation share, and the check
that a batch's targets fit the model's vocabulary.

``zero_infinity=True`` zeroes the loss of an impossible alignment (too few output frames for the
target) instead of returning inf; how the loop weighs and counts losses is in ``training.loop``.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from asr_pipeline.data.collate import Batch
from asr_pipeline.training.config import TrainConfig


def _autocast(config: TrainConfig, device: torch.device) -> contextlib.AbstractContextManager:
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16}.get(config.run.precision)
    return torch.autocast(device.type, dtype=dtype) if dtype else contextlib.nullcontext()


def ctc_losses(model: nn.Module, batch: Batch, config: TrainConfig) -> tuple[Tensor, Tensor, Tensor]:
    """Per-utterance CTC losses (B,), the (B, T', V) log-probs and (B,) output lengths."""
    with _autocast(config, batch.features.device):
        log_probs, out_lengths = model(batch.features, batch.feature_lengths)  # (B, T', V), (B,)
    # CTC's forward-backward sums many small probabilities: always in float32, whatever the autocast.
    losses = F.ctc_loss(
        log_probs.float().transpose(0, 1),
        batch.targets,
        out_lengths,
        batch.target_lengths,
        blank=config.model.blank_id,
        reduction="none",
        zero_infinity=True,
    )  # (B,)
    return losses, log_probs, out_lengths


def check_targets(batch: Batch, vocab_size: int, blank_id: int) -> None:
    mask = (
        torch.arange(batch.targets.shape[1], device=batch.targets.device) < batch.target_lengths[:, None]
    )  # (B, U)
    used = batch.targets[mask]
    bad = (used >= vocab_size) | (used < 0) | (used == blank_id)
    if bool(bad.any()):
        raise ValueError(
            f"batch {batch.ids} holds target ids {sorted(set(used[bad].tolist()))} outside the "
            f"{vocab_size}-entry vocabulary or equal to blank_id={blank_id}; were the shards "
            "extracted with another tokenizer?"
        )


__all__ = ["check_targets", "ctc_losses"]
