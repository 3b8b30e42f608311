"""Pad a list of ``ShardDataset`` items into one CTC training batch.

Batch schema::

    features         (B, T, F) float32  zero-padded past each utterance's length
    feature_lengths  (B,)      int64    valid frames per utterance (<= T)
    targets          (B, U)    int64    CTC model ids, padded with 0 past target_lengths
    target_lengths   (B,)      int64    valid tokens per utterance (<= U)
    ids              list[str] of B utterance ids
    texts            list[str] of B reference transcripts
    duration_ms      (B,)      int64    audio duration, for audio-seconds throughput
    skipped          list[str] "location: reason" of the items dropped from this batch (see below)

    B utterances, T longest utterance in frames, F feature bins, U longest target in tokens.

A dataset that featurizes audio on the fly (``data.audio_dataset``) returns a ``SkippedExample`` for an
item it cannot produce (undecodable audio, ...). The collate drops it and lists it in ``skipped``, so the
training loop counts it; raising in a DataLoader worker would end the run for one bad file, and in DDP a
rank that stops stepping hangs the others. A batch whose items were all skipped has B = 0 (and T = 0);
the training loop still takes part in the step's gradient all-reduce for it (``training.loop``).

Targets are padded (B, U) rather than concatenated: ``torch.nn.functional.ctc_loss`` reads only the
first ``target_lengths[b]`` entries of row b, so the pad value never matters, and the padded form
works with both the native CPU and CUDA kernels.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields

import torch
from torch import Tensor
from torch.utils.data import get_worker_info


@dataclass
class Batch:
    features: Tensor  # (B, T, F)
    feature_lengths: Tensor  # (B,)
    targets: Tensor  # (B, U)
    target_lengths: Tensor  # (B,)
    ids: list[str]
    texts: list[str]
    duration_ms: Tensor  # (B,)
    skipped: list[str] = field(default_factory=list)
    # (B, T') frame labels of an alignment (training.alignment), FRAME_LABEL_PAD past each utterance's frames;
    # None without one.
    frame_labels: Tensor | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        return self._map(lambda tensor: tensor.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> Batch:
        """Called by DataLoader(pin_memory=True) so host-to-GPU copies can be asynchronous."""
        return self._map(Tensor.pin_memory)

    def _map(self, function: Callable[[Tensor], Tensor]) -> Batch:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return Batch(**{k: function(v) if isinstance(v, Tensor) else v for k, v in values.items()})


FRAME_LABEL_PAD = -100  # cross_entropy's ignore_index: padding frames of Batch.frame_labels


def check_frame_labels(batch: Batch, output_lengths: Tensor, input_lengths: Tensor | None = None) -> None:
    """Refuse an alignment whose frame labels do not match the model's output frames, utterance by utterance
    (an alignment made by a model of another frame rate): one line naming the first utterance and how many
    of the batch differ. ``input_lengths``: also name the utterance's input frames."""
    assert batch.frame_labels is not None
    label_lengths = (batch.frame_labels != FRAME_LABEL_PAD).sum(1).to(output_lengths.device)  # (B,)
    wrong = (label_lengths != output_lengths).nonzero().flatten().tolist()
    if wrong:
        row = wrong[0]
        inputs = "" if input_lengths is None else f" for its {int(input_lengths[row])}"
        raise ValueError(
            f"utterance {batch.ids[row]}: the alignment has {int(label_lengths[row])} frame labels but the model "
            f"outputs {int(output_lengths[row])} frames{inputs} ({len(wrong)} of {len(batch)} in the batch "
            "differ); align with a model of the same frame rate (architecture and subsampling) as the one trained"
        )


@dataclass(frozen=True)
class SkippedExample:
    """What a dataset returns instead of an item it could not produce."""

    id: str
    location: str  # manifest file and line/row, or the audio file
    reason: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.location}: {self.reason}" + (f" ({self.detail})" if self.detail else "")


def collate_batch(
    items: list[dict | SkippedExample],
    feature_dim: int | None = None,
    pad_to: Callable[[int], int] | None = None,
) -> Batch:
    """Pad ``items`` into a ``Batch``, dropping ``SkippedExample``s (listed in ``Batch.skipped``).

    ``feature_dim`` (F) shapes the (0, 0, F) features of a batch whose items were all skipped; without it
    such a batch is an error. ``pad_to`` maps the longest utterance's frames to the T to pad to (at least
    as many: ``data.batching.TimeBuckets.padded_length``); by default T is the longest's.
    """
    if not items:
        raise ValueError("cannot collate an empty batch")
    skipped = [str(item) for item in items if isinstance(item, SkippedExample)]
    items = [item for item in items if not isinstance(item, SkippedExample)]
    if not items:
        if feature_dim is None:
            raise ValueError(f"every item of the batch was skipped ({'; '.join(skipped)})")
        return _empty_batch(feature_dim, skipped)
    num_bins = {item["features"].shape[1] for item in items}
    if len(num_bins) != 1:
        ids = [item["id"] for item in items]
        raise ValueError(
            f"utterances {ids} have different feature dimensions {sorted(num_bins)}; "
            "all shards of a run must come from one frontend"
        )
    feature_lengths = torch.tensor([item["features"].shape[0] for item in items], dtype=torch.int64)
    target_lengths = torch.tensor([item["tokens"].numel() for item in items], dtype=torch.int64)
    batch_size, longest, bins = len(items), int(feature_lengths.max()), num_bins.pop()
    frames = longest if pad_to is None else pad_to(longest)
    if frames < longest:
        raise ValueError(
            f"pad_to({longest}) = {frames}: a batch cannot be padded to fewer frames than its longest"
        )
    # Written once: each row's frames copied, only the padding after them zeroed.
    features = _batch_tensor((batch_size, frames, bins))  # (B, T, F)
    targets = torch.zeros(batch_size, int(target_lengths.max()), dtype=torch.int64)  # (B, U)
    for b, (item, length) in enumerate(zip(items, feature_lengths.tolist(), strict=True)):
        features[b, :length] = item["features"]
        features[b, length:] = 0.0
        targets[b, : target_lengths[b]] = item["tokens"]
    frame_labels = None
    if "frame_labels" in items[0]:
        longest = max(int(item["frame_labels"].numel()) for item in items)
        frame_labels = torch.full((batch_size, longest), FRAME_LABEL_PAD, dtype=torch.int64)  # (B, T')
        for b, item in enumerate(items):
            frame_labels[b, : item["frame_labels"].numel()] = item["frame_labels"]
    return Batch(
        features=features,
        feature_lengths=feature_lengths,
        targets=targets,
        target_lengths=target_lengths,
        ids=[item["id"] for item in items],
        texts=[item["text"] for item in items],
        duration_ms=torch.tensor([item["duration_ms"] for item in items], dtype=torch.int64),
        skipped=skipped,
        frame_labels=frame_labels,
    )


def _batch_tensor(shape: tuple[int, int, int]) -> Tensor:
    """An uninitialised float32 tensor; in a DataLoader worker, in shared memory, where the batch goes to
    the main process anyway: allocated there, it is not copied there (``default_collate`` does the same)."""
    if get_worker_info() is None:
        return torch.empty(shape, dtype=torch.float32)
    storage = torch.UntypedStorage._new_shared(math.prod(shape) * 4)  # float32: 4 bytes a value
    return torch.empty(0, dtype=torch.float32).set_(storage).view(shape)


def _empty_batch(feature_dim: int, skipped: list[str]) -> Batch:
    nothing = torch.zeros(0, dtype=torch.int64)  # (0,)
    return Batch(
        features=torch.zeros(0, 0, feature_dim, dtype=torch.float32),  # (0, 0, F)
        feature_lengths=nothing,
        targets=torch.zeros(0, 0, dtype=torch.int64),  # (0, 0)
        target_lengths=nothing.clone(),
        ids=[],
        texts=[],
        duration_ms=nothing.clone(),
        skipped=skipped,
    )


__all__ = ["FRAME_LABEL_PAD", "Batch", "SkippedExample", "collate_batch"]
