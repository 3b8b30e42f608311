"""Run a trained CTC model over feature shards in padded batches."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from asr_pipeline.io.shards import iter_examples


@dataclass(frozen=True)
class BatchOutput:
    ids: list[str]
    texts: list[str]
    log_probs: torch.Tensor  # (B, T', V)
    lengths: torch.Tensor  # (B,)


@torch.inference_mode()
def iter_log_probs(
    model: nn.Module,
    shard_paths: Sequence[str],
    batch_size: int = 16,
    autocast_dtype: torch.dtype | None = None,
) -> Iterator[BatchOutput]:
    """Yield CTC log-probabilities for every example of the shards, in shard order.

    The batches run on the model's device (under autocast in ``autocast_dtype`` when given); the
    outputs come back on the CPU, float32."""
    device = next(model.parameters()).device
    batch: list[dict] = []
    for path in shard_paths:
        for example in iter_examples(path):
            batch.append(example)
            if len(batch) == batch_size:
                yield _forward(model, batch, device, autocast_dtype)
                batch = []
    if batch:
        yield _forward(model, batch, device, autocast_dtype)


def _forward(
    model: nn.Module, batch: list[dict], device: torch.device, autocast_dtype: torch.dtype | None
) -> BatchOutput:
    lengths = torch.tensor([example["rows"] for example in batch], dtype=torch.long)  # (B,)
    features = torch.zeros(len(batch), int(lengths.max()), batch[0]["cols"])  # (B, T, F)
    for i, example in enumerate(batch):
        # Shard arrays may be read-only views of Arrow buffers, which torch refuses to wrap: copy first.
        features[i, : example["rows"]] = torch.from_numpy(np.array(example["features"]))
    autocast = (
        torch.autocast(device.type, dtype=autocast_dtype) if autocast_dtype else contextlib.nullcontext()
    )
    with autocast:
        log_probs, out_lengths = model(features.to(device), lengths.to(device))  # (B, T', V), (B,)
    ids, texts = [e["id"] for e in batch], [e["text"] for e in batch]
    return BatchOutput(ids, texts, log_probs.float().cpu(), out_lengths.cpu())
