"""Lengths -> masks. One convention for the whole code base, PyTorch's ``key_padding_mask`` one:

    True  = padding (ignore this frame)
    False = a real frame

``padding_mask`` (lengths -> (B, T)) is ``asr_kernels.masks.padding_mask``: a Triton kernel where the
kernels choice says so (``asr_kernels._dispatch``), the PyTorch reference elsewhere; it is re-exported here so
models import every mask helper from one place.

``span_mask`` (lengths -> (B, T)) is the other kind: True inside the spans masked prediction (HuBERT) or
SpecAugment on hidden states (W2V-BERT) hide.

Dimension legend: B batch, T frames.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from asr_kernels.masks import padding_mask

__all__ = [
    "SPAN_RULES",
    "mask_padded_frames",
    "normalize_input",
    "padding_mask",
    "span_mask",
    "utterance_normalize",
]

SPAN_RULES = ("fairseq", "hf")


def mask_padded_frames(x: Tensor, mask: Tensor | None) -> Tensor:
    """Zero the padded frames of (B, T, ...) ``x``.

    Every layer that mixes neighbouring frames (convolutions, strided subsampling) must see zeros there, the
    same values its own zero padding would give an unpadded example; that is what makes a padded batch
    compute exactly what each example computes alone.
    """
    if mask is None:
        return x
    shape = mask.shape + (1,) * (x.dim() - mask.dim())
    return x.masked_fill(mask.view(shape), 0.0)


def utterance_normalize(features: Tensor, lengths: Tensor, eps: float = 1e-5) -> Tensor:
    """Per-utterance mean/variance normalization over each example's real frames (utterance CMVN).

    features: (B, T, F); lengths: (B,). Padded frames come out as zeros. Raw log-mel values sit around
    -15..20 with a per-recording offset (gain, channel); removing it per utterance needs no corpus
    statistics, so a checkpoint carries no CMVN file, and it makes the model gain-invariant.
    """
    valid = (~padding_mask(lengths, features.shape[1])).unsqueeze(-1).to(features.dtype)  # (B, T, 1)
    count = valid.sum(dim=1, keepdim=True).clamp_min(1.0)  # (B, 1, 1)
    mean = (features * valid).sum(dim=1, keepdim=True) / count  # (B, 1, F)
    variance = (((features - mean) * valid) ** 2).sum(dim=1, keepdim=True) / count  # (B, 1, F)
    return (features - mean) * torch.rsqrt(variance + eps) * valid


def normalize_input(features: Tensor, lengths: Tensor, kind: str | None) -> Tensor:
    """(B, T, F) input features as a model's ``input_normalization`` says: utterance CMVN, or as they are."""
    return utterance_normalize(features, lengths) if kind == "utterance" else features


def span_mask(
    lengths: Tensor,
    total: int,
    prob: float,
    span: int,
    min_spans: int,
    *,
    rule: Literal["fairseq", "hf"],
    generator: torch.Generator | None = None,
) -> Tensor:
    """(B, total) bool, True inside the masked spans of ``span`` frames, drawn within each row's length
    ``L`` (``lengths`` (B,)). The rules differ in how many spans a row gets, with u ~ U[0, 1):

    - ``"fairseq"`` (HuBERT's, fairseq's static ``compute_mask_indices``): ``max(min_spans, int(prob * L /
      span + u))``, u drawn per row, distinct starts in ``[0, max(L - span, 1))``, spans cut at ``L``;
    - ``"hf"`` (transformers' ``_compute_mask_indices``, wav2vec 2.0's): ``min(max(int(prob * L / span + u),
      min_spans), total // span, L - span + 1)``, u drawn once for the batch, distinct starts in
      ``[0, L - span]``.

    Drawn on the lengths' device and read nowhere: the distinct starts are the first of each row's
    positions in a random order (random keys, sorted), so a training step never waits for the GPU here.
    A ``generator`` on another device draws its numbers there and copies them over without waiting: a CPU
    generator gives the same masks on every device (validation's fixed masks), for two copies to the GPU."""
    device, batch = lengths.device, lengths.numel()
    draws = generator.device if generator is not None else device
    lengths = lengths.long()

    def uniform(*shape: int) -> Tensor:  # drawn by the generator, where it lives; copied without waiting
        return torch.rand(shape, device=draws, generator=generator).to(device, non_blocking=True)

    u = uniform(batch if rule == "fairseq" else 1)
    count = (prob * lengths / span + u).floor().long().clamp(min=min_spans)  # (B,)
    if rule == "fairseq":
        room = (lengths - span).clamp(min=1)
    else:
        room = (lengths - span + 1).clamp(min=0)
        count = count.clamp(max=total // span)
    count = torch.minimum(count, room)
    positions = torch.arange(total, device=device)
    keys = uniform(batch, total)
    keys = keys.masked_fill(positions >= room[:, None], 2.0)  # never a start: ordered after every valid one
    order = keys.argsort(dim=1)
    rank = torch.empty_like(order).scatter_(1, order, positions.expand(batch, total))  # each place in it
    starts = (rank < count[:, None]).long()  # (B, total): count distinct starts
    started = starts.cumsum(1)
    mask = started - F.pad(started, (span, 0))[:, :total] > 0  # a start within the span's frames up to here
    if rule == "fairseq":
        mask &= positions < lengths[:, None]
    return mask
