"""Pad a list of ``ShardDataset`` items into one CTC training batch.

Batch schema::

    features         (B, T, F) float32  zero-padded past each utterance's length
    feature_lengths  (B,)      int64    valid frames per utterance (<= T)
    targets          (B, U)    int64    CTC model ids, padded with 0 past target_lengths
    target_lengths   (B,)      int64    valid tokens per utterance (<= U)
    ids              list[str] of B utterance ids
    texts            list[str] of B reference transcripts
    duration_ms      (B,)      int64    audio duration, for audio-seconds throughput

    B utterances, T longest utterance in frames, F feature bins, U longest target in tokens.

Targets are padded (B, U) rather than concatenated: ``torch.nn.functional.ctc_loss`` reads only the
first ``target_lengths[b]`` entries of row b, so the pad value never matters, and the padded form
works with both the native CPU and CUDA kernels.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

import torch
from torch import Tensor


@dataclass
class Batch:
    features: Tensor  # (B, T, F)
    feature_lengths: Tensor  # (B,)
    targets: Tensor  # (B, U)
    target_lengths: Tensor  # (B,)
    ids: list[str]
    texts: list[str]
    duration_ms: Tensor  # (B,)

    def __len__(self) -> int:
        return len(self.ids)

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        return self._map(lambda tensor: tensor.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> Batch:
        """Called by DataLoader(pin_memory=True) so host-to-GPU copies can be asynchronous."""
        return self._map(Tensor.pin_memory)

    def _map(self, function: Callable[[Tensor], Tensor]) -> Batch:
        tensors = {
            f.name: function(getattr(self, f.name)) for f in fields(self) if f.name not in ("ids", "texts")
        }
        return Batch(**tensors, ids=self.ids, texts=self.texts)


def collate_batch(items: list[dict]) -> Batch:
    if not items:
        raise ValueError("cannot collate an empty batch")
    num_bins = {item["features"].shape[1] for item in items}
    if len(num_bins) != 1:
        ids = [item["id"] for item in items]
        raise ValueError(
            f"utterances {ids} have different feature dimensions {sorted(num_bins)}; "
            "all shards of a run must come from one frontend"
        )
    feature_lengths = torch.tensor([item["features"].shape[0] for item in items], dtype=torch.int64)
    target_lengths = torch.tensor([item["tokens"].numel() for item in items], dtype=torch.int64)
    batch_size, frames, bins = len(items), int(feature_lengths.max()), num_bins.pop()
    features = torch.zeros(batch_size, frames, bins, dtype=torch.float32)  # (B, T, F)
    targets = torch.zeros(batch_size, int(target_lengths.max()), dtype=torch.int64)  # (B, U)
    for b, item in enumerate(items):
        features[b, : feature_lengths[b]] = item["features"]
        targets[b, : target_lengths[b]] = item["tokens"]
    return Batch(
        features=features,
        feature_lengths=feature_lengths,
        targets=targets,
        target_lengths=target_lengths,
        ids=[item["id"] for item in items],
        texts=[item["text"] for item in items],
        duration_ms=torch.tensor([item["duration_ms"] for item in items], dtype=torch.int64),
    )


__all__ = ["Batch", "collate_batch"]
