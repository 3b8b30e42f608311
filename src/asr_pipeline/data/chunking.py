"""Chunked training of long utterances (RETURNN's ``chunking``): a batch's utterances cut into chunks of
``size`` feature frames starting every ``step`` frames, each chunk a sequence of its own with its own frame
labels, so the loss is taken on each chunk (``training.ctc.chunked_framewise_losses``).

Boundaries (``chunk_spans``): chunk k covers the input frames [k * step, min(k * step + size, T)). Chunks
are cut until one reaches the utterance's end, so the last one may be shorter than ``size`` (a partial
chunk) and none lies wholly inside the chunk before it; RETURNN cuts while the start is below T, which
repeats an overlapping run's tail in ever shorter chunks. An utterance of at most ``size`` frames is one
chunk: itself. With ``step < size`` neighbouring chunks share ``size - step`` frames, trained in both. A
last chunk too short for the model to output a frame from is dropped: it has no labels left.

Labels (``chunk_batch``): the frame labels are per model output frame (an alignment, ``training.alignment``),
T' = out(T) of them for T input frames, where ``out`` is the model's output-length arithmetic. The chunk
starting at input frame s holds out(e - s) output frames, and its labels start at output frame
out(T) - out(T - s): the output frames the first s input frames account for. For a model whose frame rate
comes from a cascade of strided layers (r input frames per output frame) this is s / r exactly when s is a
multiple of r, and the last chunk's labels end at the utterance's last label; ``chunk_batch`` refuses a
step that is not a multiple of r, as its chunks' labels would start between two output frames.

Schema of the chunk batch (a ``data.collate.Batch`` of C chunks, ``ChunkedBatch.utterance`` mapping each
to its row of the source batch)::

    features         (C, N, F)  the chunk's frames, zero past its length; N the longest chunk (<= size)
    feature_lengths  (C,)       frames in the chunk
    frame_labels     (C, N')    its labels, FRAME_LABEL_PAD past out(length)
    targets          (C, 0)     none: a chunk trains on its frame labels only
    ids              "<utterance id>@<first frame>"
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from asr_pipeline.data.collate import FRAME_LABEL_PAD, Batch, check_frame_labels

# Input lengths used to measure a model's frames per output frame (``frames_per_output``): long enough that
# the constant terms of any front end's length arithmetic cancel.
_PROBE_FRAMES = 1 << 14


def chunk_spans(length: int, size: int, step: int) -> list[tuple[int, int]]:
    """The (start, end) input frames of each chunk of an utterance of ``length`` frames (module docstring)."""
    if size < 1 or step < 1:
        raise ValueError(f"chunks need size >= 1 and step >= 1 frames, got size={size}, step={step}")
    spans = [(0, min(size, length))]
    while spans[-1][1] < length:
        start = spans[-1][0] + step
        spans.append((start, min(start + size, length)))
    return spans


def frames_per_output(output_lengths: Callable[[Tensor], Tensor]) -> float:
    """Input frames per output frame of a model whose output-length arithmetic is ``output_lengths``."""
    probe = torch.tensor([_PROBE_FRAMES, 2 * _PROBE_FRAMES])
    first, second = output_lengths(probe).tolist()
    return _PROBE_FRAMES / (second - first)


@dataclass
class ChunkedBatch:
    """A batch's chunks (module docstring) and, for each, its utterance's row in the source batch."""

    chunks: Batch
    utterance: Tensor  # (C,) int64


def chunk_batch(
    batch: Batch, size: int, step: int, output_lengths: Callable[[Tensor], Tensor]
) -> ChunkedBatch:
    """``batch`` (with ``frame_labels``) cut into chunks of ``size`` frames every ``step`` frames; its labels
    cut by the model's output-length arithmetic ``output_lengths`` ((n,) input frames -> (n,) output frames).

    Raises ValueError when ``step`` is not a multiple of the model's input frames per output frame, or when
    an utterance's labels are not out(T) for its T frames (an alignment made at another frame rate)."""
    if batch.frame_labels is None:
        raise ValueError("chunk_batch cuts frame labels, but the batch has none (data.alignment)")
    ratio = frames_per_output(output_lengths)
    if ratio != int(ratio) or step % int(ratio):
        raise ValueError(
            f"data.chunk_step_frames={step} is not a multiple of the model's {ratio:g} input frames per output "
            "frame: a chunk's labels would start between two output frames; use a multiple of it"
        )
    device = batch.features.device
    lengths = batch.feature_lengths.cpu()
    expected = output_lengths(lengths)  # (B,)
    check_frame_labels(batch, expected, lengths)
    rows, starts, ends = [], [], []
    for row, length in enumerate(lengths.tolist()):
        for start, end in chunk_spans(length, size, step):
            rows.append(row)
            starts.append(start)
            ends.append(end)
    utterance = torch.tensor(rows, dtype=torch.int64)  # (C,)
    start = torch.tensor(starts, dtype=torch.int64)  # (C,)
    frames = torch.tensor(ends, dtype=torch.int64) - start  # (C,)
    total = lengths[utterance]  # (C,) the utterance's frames T
    label_start = output_lengths(total) - output_lengths(total - start)  # (C,) out(T) - out(T - s)
    label_count = output_lengths(frames)  # (C,)
    # A last partial chunk too short for one output frame (a front end that trims, as Zipformer's does) has
    # no labels left to train: its utterance's labels all lie in the chunks before it.
    kept = (label_count > 0).nonzero().flatten()
    utterance, start, frames, total = utterance[kept], start[kept], frames[kept], total[kept]
    label_start, label_count = label_start[kept], label_count[kept]
    rows, starts = utterance.tolist(), start.tolist()

    longest = int(frames.max())
    offsets = torch.arange(longest)[None, :]  # (1, N)
    inside = offsets < frames[:, None]  # (C, N)
    frame_index = torch.where(inside, start[:, None] + offsets, 0)  # (C, N)
    features = batch.features[utterance.to(device)[:, None], frame_index.to(device)]  # (C, N, F)
    features = features * inside.to(device)[..., None]
    longest_labels = int(label_count.max())
    label_offsets = torch.arange(longest_labels)[None, :]  # (1, N')
    labelled = label_offsets < label_count[:, None]  # (C, N')
    label_index = torch.where(labelled, label_start[:, None] + label_offsets, 0)  # (C, N')
    labels = batch.frame_labels[utterance.to(device)[:, None], label_index.to(device)]  # (C, N')
    labels = torch.where(labelled.to(device), labels, FRAME_LABEL_PAD)
    share = frames.double() / total.double()  # (C,) the chunk's part of its utterance's audio
    chunks = Batch(
        features=features,
        feature_lengths=frames.to(device),
        targets=torch.zeros(len(rows), 0, dtype=torch.int64, device=device),
        target_lengths=torch.zeros(len(rows), dtype=torch.int64, device=device),
        ids=[f"{batch.ids[row]}@{first}" for row, first in zip(rows, starts, strict=True)],
        texts=[batch.texts[row] for row in rows],
        duration_ms=(batch.duration_ms.cpu()[utterance].double() * share).round().long().to(device),
        frame_labels=labels,
    )
    return ChunkedBatch(chunks, utterance.to(device))


__all__ = ["ChunkedBatch", "chunk_batch", "chunk_spans", "frames_per_output"]
