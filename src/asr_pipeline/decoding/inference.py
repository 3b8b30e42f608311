"""Run a trained CTC model over feature shards in padded batches.

Dimension legend: B batch, T input frames, T' output frames, V vocabulary.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from asr_pipeline.io.shards import iter_examples

# Utterances read ahead and batched by length. In shard order a batch of 16 pads to its longest utterance: on the
# demo's dev split 51 % of the frames the model ran were real (144k run for 74k), batched by length over the whole
# split 91 % (81k) (benchmarks/bench_evaluation.py; the forward pass is most of what `evaluate` costs). 512
# utterances of fbank-80 are ~80 MB of features.
SORT_WINDOW = 512


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
    sort_window: int = SORT_WINDOW,
) -> Iterator[BatchOutput]:
    """Yield CTC log-probabilities for every example of the shards, in shard order, ``batch_size`` at a time.

    The model runs on batches of similar lengths: each window of ``sort_window`` examples (in shard order) is
    sorted by length and cut into batches of ``batch_size``, so little of each batch is padding; the outputs
    are then put back in shard order. An example's log-probs do not depend on the batch it ran in (its padding
    is masked), up to float rounding (~2e-6 on the demo's Zipformer). The batches run on the model's device
    (under autocast in ``autocast_dtype`` when given); the outputs come back on the CPU, float32. Frames past
    an example's length hold a uniform distribution; decoders read each example up to its length only."""
    device = next(model.parameters()).device
    window: list[dict] = []
    for path in shard_paths:
        for example in iter_examples(path):
            window.append(example)
            if len(window) == sort_window:
                yield from _window_log_probs(model, window, batch_size, device, autocast_dtype)
                window = []
    if window:
        yield from _window_log_probs(model, window, batch_size, device, autocast_dtype)


def _window_log_probs(
    model: nn.Module,
    window: list[dict],
    batch_size: int,
    device: torch.device,
    autocast_dtype: torch.dtype | None,
) -> Iterator[BatchOutput]:
    """The window's examples run in batches by length, yielded in the window's order."""
    by_length = sorted(range(len(window)), key=lambda i: window[i]["rows"])  # stable: ties keep shard order
    outputs: list[torch.Tensor] = [torch.empty(0)] * len(window)  # each example's (T', V) log-probs
    for start in range(0, len(window), batch_size):
        chosen = by_length[start : start + batch_size]
        batch = _forward(model, [window[i] for i in chosen], device, autocast_dtype)
        for k, i in enumerate(chosen):
            outputs[i] = batch.log_probs[k, : int(batch.lengths[k])]
    for start in range(0, len(window), batch_size):
        examples, rows = window[start : start + batch_size], outputs[start : start + batch_size]
        lengths = torch.tensor([row.shape[0] for row in rows], dtype=torch.long)  # (B,)
        vocab = rows[0].shape[-1]
        log_probs = torch.full((len(rows), int(lengths.max()), vocab), -math.log(vocab))  # (B, T', V)
        for k, row in enumerate(rows):
            log_probs[k, : row.shape[0]] = row
        yield BatchOutput([e["id"] for e in examples], [e["text"] for e in examples], log_probs, lengths)


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
