"""Zero the padded frames of a batch from its lengths, in one pass: MaskTime ``(B, T, C)`` and MaskChannelTime
``(B, C, T)``.

Frame t of example b is padding when ``t >= lengths[b]`` (the code base's convention, ``padding_mask`` in
src/asr_pipeline/modules/masks.py); padding comes out as zeros, real frames unchanged. Every layer that mixes
neighbouring frames (convolutions, strided subsampling) must see zeros there, the same values its own zero
padding would give an unpadded example. A length of 0 masks the whole example; one of T or more masks nothing.

The reference builds a (B, T) bool mask and calls ``masked_fill``; the kernel reads ``lengths`` and compares
each tile's frame indices against it, so no mask tensor exists, and its loads are masked by the same test,
so padded frames are written as zeros without being read. Backward is the same masking of the upstream
gradient (the op is linear, its own adjoint) and saves only ``lengths``, not ``x``. Like ``masked_fill``,
padding is zeroed even where ``x`` holds inf or NaN (multiplying by a 0/1 mask would keep the NaN).

Dimension legend: B batch, T frames, C channels.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from asr_kernels._bench import BenchCase, tensor_bytes
from asr_kernels._dispatch import HAS_TRITON, use_triton
from asr_kernels._kernel_op import KernelOp

# Dtypes the kernel handles; anything else (integers, bool, complex) goes to the reference's masked_fill.
_KERNEL_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

# Tile shape: up to _MAX_BLOCK values along whichever of T and C is contiguous in memory (C for (B, T, C),
# T for (B, C, T)), the other dim filling _TILE_ELEMENTS; 16 values per thread over 4 warps, as in glu.py.
# Not yet tuned on a GPU: see docs/results/kernels.md once one is lent. The tests shrink both to force ragged tiles.
_MAX_BLOCK = 1024
_TILE_ELEMENTS = 2048
_NUM_WARPS = 4


def _check_lengths(op: str, layout: str, x: Tensor, lengths: Tensor) -> None:
    """Raises ValueError unless ``x`` is 3-D and ``lengths`` is an integer (B,) for its batch."""
    if x.ndim != 3:
        raise ValueError(f"{op} takes x of shape {layout}, got a {x.ndim}-d tensor of shape {tuple(x.shape)}")
    check_frame_counts(op, x, lengths)


def check_frame_counts(op: str, x: Tensor, lengths: Tensor) -> None:
    """Raises ValueError, naming ``op``, unless ``lengths`` is an integer (B,) for the batch of ``x`` (B, ...)."""
    if lengths.ndim != 1 or lengths.shape[0] != x.shape[0]:
        raise ValueError(
            f"{op}: lengths must be (B,) = ({x.shape[0]},), one frame count per example of x {tuple(x.shape)}, "
            f"got shape {tuple(lengths.shape)}"
        )
    if lengths.dtype.is_floating_point or lengths.dtype.is_complex or lengths.dtype == torch.bool:
        raise ValueError(
            f"{op}: lengths must hold integer frame counts, got dtype {lengths.dtype}; pass lengths.long()"
        )


def _padding(lengths: Tensor, num_frames: int, device: torch.device) -> Tensor:
    frames = torch.arange(num_frames, device=device)  # (T,)
    return frames[None, :] >= lengths.to(device)[:, None]  # (B, T), True at padding


def mask_time_reference(x: Tensor, lengths: Tensor) -> Tensor:
    """Plain PyTorch MaskTime: ``x`` (B, T, C) with frames ``t >= lengths[b]`` zeroed; what the kernel matches."""
    _check_lengths("mask_time", "(B, T, C)", x, lengths)
    return x.masked_fill(_padding(lengths, x.shape[1], x.device)[:, :, None], 0.0)


def mask_channel_time_reference(x: Tensor, lengths: Tensor) -> Tensor:
    """Plain PyTorch MaskChannelTime: ``x`` (B, C, T) with frames ``t >= lengths[b]`` zeroed."""
    _check_lengths("mask_channel_time", "(B, C, T)", x, lengths)
    return x.masked_fill(_padding(lengths, x.shape[2], x.device)[:, None, :], 0.0)


if HAS_TRITON:
    import triton
    import triton.language as tl

    from asr_kernels._tiles import cdiv, tile_sides, time_tile

    @triton.jit
    def _mask_time_kernel(
        x_ptr,
        lengths_ptr,
        out_ptr,
        num_frames,
        channels,
        num_time_blocks,
        lengths_stride,
        x_batch_stride,
        x_time_stride,
        x_channel_stride,
        out_batch_stride,
        out_time_stride,
        out_channel_stride,
        BLOCK_T: tl.constexpr,
        BLOCK_C: tl.constexpr,
    ):
        batch, frames, cols, in_bounds, real = time_tile(
            lengths_ptr, lengths_stride, num_frames, channels, num_time_blocks, BLOCK_T, BLOCK_C
        )  # frames (BLOCK_T, 1), cols (BLOCK_C,), masks (BLOCK_T, BLOCK_C)
        x_offsets = batch * x_batch_stride + frames * x_time_stride + cols[None, :] * x_channel_stride
        out_offsets = batch * out_batch_stride + frames * out_time_stride + cols[None, :] * out_channel_stride
        # Padded frames are not loaded (other=0.0): zeros cost a store, no read, and NaN padding cannot leak.
        x = tl.load(x_ptr + x_offsets, mask=real, other=0.0)
        tl.store(out_ptr + out_offsets, x, mask=in_bounds)

    def launch_config(num_frames: int, channels: int, channels_first: bool) -> tuple[int, int, int]:
        """(BLOCK_T, BLOCK_C, number of time blocks): the contiguous dim gets the wide side of the tile."""
        if channels_first:  # (B, C, T): T is contiguous
            block_t, block_c = tile_sides(num_frames, channels, _MAX_BLOCK, _TILE_ELEMENTS)
        else:  # (B, T, C): C is contiguous
            block_c, block_t = tile_sides(channels, num_frames, _MAX_BLOCK, _TILE_ELEMENTS)
        return block_t, block_c, cdiv(num_frames, block_t)


def _mask(x: Tensor, lengths: Tensor, channels_first: bool) -> Tensor:
    """Launches the kernel on ``x`` (B, T, C), or (B, C, T) when ``channels_first``; returns a new contiguous
    tensor of its shape. Used for the forward and, on the upstream gradient, for the backward."""
    out = x.new_empty(x.shape)
    if out.numel() == 0:
        return out
    # Both seen as (B, T, C) through their strides; nothing is copied.
    x_btc, out_btc = (x.transpose(1, 2), out.transpose(1, 2)) if channels_first else (x, out)
    batch, num_frames, channels = x_btc.shape
    block_t, block_c, num_time_blocks = launch_config(num_frames, channels, channels_first)
    grid = (batch * num_time_blocks, cdiv(channels, block_c))
    _mask_time_kernel[grid](
        x_btc,
        lengths,
        out_btc,
        num_frames,
        channels,
        num_time_blocks,
        lengths.stride(0),
        *x_btc.stride(),
        *out_btc.stride(),
        BLOCK_T=block_t,
        BLOCK_C=block_c,
        num_warps=_NUM_WARPS,
    )
    return out


def _mask_time(x: Tensor, lengths: Tensor) -> Tensor:
    """MaskTime on (B, T, C) through the Triton kernel (forward and backward); no dispatch, no checks."""
    return _mask(x, lengths, channels_first=False)


def _mask_channel_time(x: Tensor, lengths: Tensor) -> Tensor:
    """MaskChannelTime on (B, C, T) through the Triton kernel (forward and backward); no dispatch, no checks."""
    return _mask(x, lengths, channels_first=True)


def _like_x(x: Tensor, lengths: Tensor) -> Tensor:
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _mask_setup_context(ctx, inputs: tuple[Tensor, Tensor], output: Tensor) -> None:
    ctx.save_for_backward(inputs[1])  # lengths only: the op is linear, x is not needed


def _mask_time_kernel_backward(ctx, grad_out: Tensor) -> tuple[Tensor, None]:
    # The same masking of the gradient, through a backward op with no autograd formula of its own: a double
    # backward raises. (It would be the same masking again; refusing keeps every op in asr_kernels alike.)
    (lengths,) = ctx.saved_tensors
    return _mask_time_backward_op(grad_out, lengths), None


def _mask_channel_time_kernel_backward(ctx, grad_out: Tensor) -> tuple[Tensor, None]:
    (lengths,) = ctx.saved_tensors
    return _mask_channel_time_backward_op(grad_out, lengths), None


# The kernel path (``_kernel_op``): custom ops for torch.compile, differentiable through the backward, which
# saves only ``lengths``; eager calls skip the custom ops' dispatch.
_mask_time_backward_op = KernelOp("mask_time_backward", _mask_time, _like_x)
_mask_channel_time_backward_op = KernelOp("mask_channel_time_backward", _mask_channel_time, _like_x)
mask_time_kernel = KernelOp("mask_time", _mask_time, _like_x, _mask_setup_context, _mask_time_kernel_backward)
mask_channel_time_kernel = KernelOp(
    "mask_channel_time", _mask_channel_time, _like_x, _mask_setup_context, _mask_channel_time_kernel_backward
)


def mask_time(x: Tensor, lengths: Tensor) -> Tensor:
    """``x`` (B, T, C) with every frame ``t >= lengths[b]`` zeroed; ``lengths`` (B,) integer frame counts.

    Runs the fused kernel when ``use_triton`` says so (``_dispatch``) and ``x`` is floating point; otherwise
    ``mask_time_reference``. ``lengths`` may live on another device (it is moved to x's). Raises ValueError
    for a shape or dtype that does not fit.
    """
    _check_lengths("mask_time", "(B, T, C)", x, lengths)
    lengths = lengths.to(x.device)
    if use_triton("mask_time", x, x.dtype in _KERNEL_DTYPES):
        return mask_time_kernel(x, lengths)
    return mask_time_reference(x, lengths)


def mask_channel_time(x: Tensor, lengths: Tensor) -> Tensor:
    """``x`` (B, C, T) with every frame ``t >= lengths[b]`` zeroed: ``mask_time`` for channels-first tensors
    (a Conv1d's input or output), without transposing them."""
    _check_lengths("mask_channel_time", "(B, C, T)", x, lengths)
    lengths = lengths.to(x.device)
    if use_triton("mask_channel_time", x, x.dtype in _KERNEL_DTYPES):
        return mask_channel_time_kernel(x, lengths)
    return mask_channel_time_reference(x, lengths)


class MaskTime(nn.Module):
    """``mask_time`` as a module (``channels_first=False``, x (B, T, C)) or ``mask_channel_time`` (B, C, T)."""

    def __init__(self, channels_first: bool = False) -> None:
        super().__init__()
        self.channels_first = channels_first

    def forward(self, x: Tensor, lengths: Tensor) -> Tensor:
        return mask_channel_time(x, lengths) if self.channels_first else mask_time(x, lengths)

    def extra_repr(self) -> str:
        return f"channels_first={self.channels_first}"


def bench_case(batch: int, seq_len: int, channels: int, heads: int, dtype: torch.dtype, device) -> BenchCase:
    """MaskTime on an encoder activation (B, T, C). Every frame is real, so the GB/s counts only bytes the kernel
    moves (it skips reading padded frames, which would flatter it against the byte count below)."""
    x = torch.randn(batch, seq_len, channels, dtype=dtype, device=device, requires_grad=True)
    lengths = torch.full((batch,), seq_len, dtype=torch.int64, device=device)
    # forward: read x, write out; backward: read grad_out, write grad_x (lengths: B values, not counted)
    return BenchCase(
        "mask_time",
        mask_time_reference,
        mask_time_kernel,
        (x, lengths),
        2 * tensor_bytes(x),
        4 * tensor_bytes(x),
    )


def bench_cases(
    batch: int, seq_len: int, channels: int, heads: int, dtype: torch.dtype, device
) -> list[BenchCase]:
    """``bench_case`` (MaskTime) and MaskChannelTime on the (B, C, T) a depthwise Conv1d reads."""
    x = torch.randn(batch, channels, seq_len, dtype=dtype, device=device, requires_grad=True)
    lengths = torch.full((batch,), seq_len, dtype=torch.int64, device=device)
    mask_channel_time_case = BenchCase(
        "mask_channel_time",
        mask_channel_time_reference,
        mask_channel_time_kernel,
        (x, lengths),
        2 * tensor_bytes(x),
        4 * tensor_bytes(x),
    )
    return [bench_case(batch, seq_len, channels, heads, dtype, device), mask_channel_time_case]
