"""Copying a model's weights into a wider copy of itself (``training.growth``'s widening).

Widening builds the same architecture with more heads (each as wide as before) and proportionally wider
feed-forward and convolution channels, then copies every old tensor into the leading corner of the new one
and keeps the new model's fresh initialisation everywhere else (RETURNN's ``copy_param_mode="subset"``).
Channels are laid out head-major everywhere ((H, head_dim) flattened), so the old heads are the first ones
of the new layout and a leading slice is the right place for them.

A dimension that packs several projections side by side -- a fused q/k/v projection, the two halves of a
GLU -- is not a plain prefix: each part must be copied into the leading slice of the same part of the new
tensor. Modules say so with ``mark_fused(parameter, dim, proportions)``, the parts' relative sizes (1, 1, 1
for q/k/v of equal widths); the copy reads the mark from the new model's parameter.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch
from torch import Tensor, nn

FUSED_ATTRIBUTE = "widening_segments"  # on a Parameter: {dim: proportions of the parts packed along it}


def mark_fused(parameter: Tensor, dim: int, proportions: Sequence[int]) -> None:
    """Record that ``parameter``'s ``dim`` packs parts of these relative sizes, in this order."""
    segments = dict(getattr(parameter, FUSED_ATTRIBUTE, {}))
    segments[dim] = tuple(int(part) for part in proportions)
    setattr(parameter, FUSED_ATTRIBUTE, segments)


def mark_fused_linear(linear: nn.Linear | nn.Conv1d, proportions: Sequence[int]) -> None:
    """A projection whose outputs pack parts of these relative sizes (weight and bias dim 0)."""
    mark_fused(linear.weight, 0, proportions)
    if linear.bias is not None:
        mark_fused(linear.bias, 0, proportions)


def _part_slices(
    name: str, dim: int, old: int, new: int, proportions: Sequence[int]
) -> list[tuple[int, int, int]]:
    """[(old start, new start, length)] along one dimension: the old parts into the leads of the new ones."""
    if old == new:
        return [(0, 0, old)]
    total = sum(proportions)
    if any(size * part % total for size in (old, new) for part in proportions):
        raise ValueError(
            f"{name}: dimension {dim} packs parts in proportions {tuple(proportions)}, which sizes {old} -> "
            f"{new} do not divide into; choose a width fraction that keeps every part whole"
        )
    slices, old_start, new_start = [], 0, 0
    for part in proportions:
        old_size, new_size = old * part // total, new * part // total
        slices.append((old_start, new_start, old_size))
        old_start, new_start = old_start + old_size, new_start + new_size
    return slices


def copy_into_wider(
    name: str, old: Tensor, new: Tensor, segments: dict[int, tuple[int, ...]] | None = None
) -> Tensor:
    """``new`` with ``old`` copied into the leading slice of each (part of each) dimension, in place."""
    if old.dim() != new.dim() or any(o > n for o, n in zip(old.shape, new.shape, strict=True)):
        raise ValueError(
            f"{name}: cannot widen a tensor of shape {tuple(old.shape)} into {tuple(new.shape)}: widening "
            "never shrinks a dimension or changes the number of dimensions"
        )
    segments = segments or {}
    per_dim = [
        _part_slices(name, dim, o, n, segments.get(dim, (1,)))
        for dim, (o, n) in enumerate(zip(old.shape, new.shape, strict=True))
    ]
    with torch.no_grad():
        for parts in itertools.product(*per_dim):
            source = tuple(slice(start, start + length) for start, _, length in parts)
            target = tuple(slice(start, start + length) for _, start, length in parts)
            new[target] = old[source].to(new.dtype)
    return new


def widen_into(old_model: nn.Module, new_model: nn.Module) -> dict[str, int]:
    """Copy every parameter and saved buffer of ``old_model`` into the same-named, equal or wider one of
    ``new_model`` (in place); returns the counts of tensors copied whole and widened. Buffers left out of
    the state dict (``persistent=False``: tables derived from the width, such as sinusoidal positions) keep
    the new model's own values."""

    def tensors(model: nn.Module) -> dict[str, Tensor]:
        saved = model.state_dict(keep_vars=True).keys()
        buffers = {name: buffer for name, buffer in model.named_buffers() if name in saved}
        return dict(model.named_parameters()) | buffers

    old_state, new_state = tensors(old_model), tensors(new_model)
    if old_state.keys() != new_state.keys():
        differ = sorted(old_state.keys() ^ new_state.keys())
        raise ValueError(f"the wider model is not the same architecture: tensors differ: {differ[:5]}")
    counts = {"copied": 0, "widened": 0}
    for name, new in new_state.items():
        old = old_state[name]
        counts["copied" if old.shape == new.shape else "widened"] += 1
        copy_into_wider(name, old.detach(), new.data, getattr(new, FUSED_ATTRIBUTE, None))
    return counts


__all__ = ["FUSED_ATTRIBUTE", "copy_into_wider", "mark_fused", "mark_fused_linear", "widen_into"]
