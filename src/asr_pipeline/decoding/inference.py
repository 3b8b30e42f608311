"""Run a trained CTC model over feature shards in padded batches."""

from __future__ import annotations

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
    model: nn.Module, shard_paths: Sequence[str], batch_size: int = 16
) -> Iterator[BatchOutput]:
    """Yield CTC log-probabilities for every example of the shards, in shard order."""
    batch: list[dict] = []
    for path in shard_paths:
        for example in iter_examples(path):
            batch.append(example)
            if len(batch) == batch_size:
                yield _forward(model, batch)
                batch = []
    if batch:
        yield _forward(model, batch)


def _forward(model: nn.Module, batch: list[dict]) -> BatchOutput:
    lengths = torch.tensor([example["rows"] for example in batch], dtype=torch.long)  # (B,)
    features = torch.zeros(len(batch), int(lengths.max()), batch[0]["cols"])  # (B, T, F)
    for i, example in enumerate(batch):
        # Shard arrays may be read-only views of Arrow buffers, which torch refuses to wrap: copy first.
        features[i, : example["rows"]] = torch.from_numpy(np.array(example["features"]))
    log_probs, out_lengths = model(features, lengths)
    return BatchOutput([e["id"] for e in batch], [e["text"] for e in batch], log_probs, out_lengths)
