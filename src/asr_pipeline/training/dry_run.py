"""``run.dry_run``: one forward pass and loss on the first batch, to check data, model and device fit
together before a long job (a shard of the wrong dimension, targets outside the vocabulary, a batch that
does not fit in memory for the forward pass). No backward pass, no optimizer step, no checkpoint."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader

from asr_pipeline.training.config import TrainConfig
from asr_pipeline.training.ctc import check_input_lengths, check_targets, model_losses
from asr_pipeline.training.distributed import DistributedContext, all_reduce_sum
from asr_pipeline.training.loaders import SKIPPED_SHOWN, nothing_trained_error


def dry_run(
    model: nn.Module,
    loader: DataLoader,
    config: TrainConfig,
    ctx: DistributedContext,
    vocab_size: int,
) -> dict[str, Any]:
    """Collective. The loss per target token of every rank's first batch of the sampler's current epoch
    (epoch 0, or the resumed one) that holds an example: batches whose every example the loader skipped
    (audio a header check passed but that does not decode, ...) are passed over, and a rank that finds
    none raises ``NothingKeptError`` naming the first skipped examples, as training would."""
    batch, skipped, seen = None, [], 0
    for batch in loader:
        if len(batch) > 0:
            break
        skipped += batch.skipped[: SKIPPED_SHOWN - len(skipped)]
        seen += len(batch.skipped)
    if batch is None or len(batch) == 0:
        raise nothing_trained_error(skipped, seen, "the dry run's epoch")
    check_targets(batch, vocab_size, config.model.blank_id)
    check_input_lengths(batch, model)
    batch = batch.to(ctx.device)
    with torch.no_grad():
        step = model_losses(model, batch, config, training=True)  # chunked as training cuts it
    tokens = batch.target_lengths if step.tokens is None else step.tokens  # (B,) what the loss is per
    stats = torch.tensor([float(step.losses.sum()), float(tokens.sum()), len(batch)], dtype=torch.float64)
    loss_sum, tokens, utterances = all_reduce_sum(stats.to(ctx.device)).tolist()
    values = {"loss": loss_sum / max(tokens, 1), "tokens": int(tokens), "utterances": int(utterances)}
    if ctx.is_main:
        print(f"[train] dry run: loss {values['loss']:.4f} on {values['utterances']} utterances", flush=True)
    return values


__all__ = ["dry_run"]
