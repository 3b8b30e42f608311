"""Lengths -> masks. One convention for the whole code base, PyTorch's ``key_padding_mask`` one:

    True  = padding (ignore this frame)
    False = a real frame

``padding_mask`` (lengths -> (B, T)) is ``asr_kernels.masks.padding_mask``: a Triton kernel where the
kernels choice says so (``asr_kernels._dispatch``), the PyTorch reference elsewhere; it is re-exported here so
models import every mask helper from one place.

Dimension legend: B batch, T frames.
"""

from __future__ import annotations

import torch
from torch import Tensor

from asr_kernels.masks import padding_mask

__all__ = [
    "mask_padded_frames",
    "normalize_input",
    "padding_mask",
    "utterance_normalize",
]


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
