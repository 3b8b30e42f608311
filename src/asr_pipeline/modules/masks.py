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
