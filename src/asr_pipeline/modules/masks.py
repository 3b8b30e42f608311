"""Lengths -> masks. One convention for the whole code base, PyTorch's ``key_padding_mask`` one:

    True  = padding (ignore this frame)
    False = a real frame

Dimension legend: B batch, T frames.
"""

from __future__ import annotations

import torch
from torch import Tensor


def padding_mask(lengths: Tensor, max_length: int | None = None) -> Tensor:
    """(B,) int lengths -> (B, T) bool, True at padded frames.

    ``max_length`` defaults to ``lengths.max()``; pass the padded tensor's T so the mask lines up with it
    even when the longest example was cropped or the batch was padded further.
    """
    if lengths.dim() != 1:
        raise ValueError(f"lengths must be 1-D (B,), got shape {tuple(lengths.shape)}")
    if max_length is None:
        max_length = int(lengths.max()) if lengths.numel() else 0
    frames = torch.arange(max_length, device=lengths.device)  # (T,)
    return frames[None, :] >= lengths[:, None]  # (B, T)


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
