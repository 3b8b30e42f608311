"""Fused GLU over the last dimension: ``out = a * sigmoid(b)`` where ``a, b = h.chunk(2, dim=-1)``.

The Conformer convolution module (Gulati et al., 2020, §2.2) gates the first pointwise conv with a GLU
(Dauphin et al., 2017): ``(B, T, 2C) -> (B, T, C)``. The kernel views ``h`` as rows (every leading dim
flattened) of ``2C`` values, reads each row's ``a`` and ``b`` halves once, computes in fp32 (fp64 for fp64
input) and writes ``out`` once. Backward saves only ``h`` and recomputes ``sigmoid(b)``:

    grad_a = grad_out * sigmoid(b)
    grad_b = grad_out * a * sigmoid(b) * (1 - sigmoid(b))

What this buys: the decomposed ``a * torch.sigmoid(b)`` (``glu_reference``) runs three kernels and saves
``sigmoid(b)`` for backward; ``torch.nn.functional.glu`` is already one fused ATen kernel each way, so against it
expect parity, not a speed-up. The kernel is the place to fuse neighbours (bias, padding mask) later.

Dimension legend: R rows (all leading dims flattened), C output channels (half the input's last dim).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from asr_kernels._bench import BenchCase, tensor_bytes
from asr_kernels._dispatch import HAS_TRITON, use_triton
from asr_kernels._kernel_op import KernelOp

# Dtypes the kernel handles; anything else (integers, complex) goes to the reference, which raises as
# torch.sigmoid does.
_KERNEL_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

# Tile shape: up to _MAX_BLOCK_C channels by enough rows to fill _TILE_ELEMENTS. 2048 elements over 4 warps
# is 16 values per thread, the usual size for a memory-bound elementwise Triton kernel. Not yet tuned on a GPU:
# see docs/results/kernels.md once one is lent. The tests shrink both to force ragged tiles.
_MAX_BLOCK_C = 1024
_TILE_ELEMENTS = 2048
_NUM_WARPS = 4


def _check_halvable(h: Tensor, dim: int) -> int:
    """Returns ``dim`` as a non-negative index; raises if ``h`` cannot be split into two halves along it."""
    if h.ndim == 0:
        raise ValueError("glu needs a tensor with at least one dimension to split, got a 0-d tensor")
    if not -h.ndim <= dim < h.ndim:
        raise ValueError(f"glu: dim {dim} is out of range for a tensor of shape {tuple(h.shape)}")
    dim %= h.ndim
    if h.shape[dim] % 2:
        raise ValueError(
            f"glu splits dim {dim} into two equal halves (a, b), but a tensor of shape {tuple(h.shape)} has "
            f"odd size {h.shape[dim]} there; make the layer before it output an even number of channels (2 * C)"
        )
    return dim


def glu_reference(h: Tensor, dim: int = -1) -> Tensor:
    """Plain PyTorch GLU, ``a * sigmoid(b)`` with ``a, b = h.chunk(2, dim)``; what the kernel must match."""
    dim = _check_halvable(h, dim)
    a, b = h.chunk(2, dim=dim)
    return a * torch.sigmoid(b)


if HAS_TRITON:
    import triton
    import triton.language as tl

    from asr_kernels._tiles import row_meta, row_tile, row_tiles

    @triton.jit
    def _load_halves(
        h_ptr, rows, cols, mask, channels, h_row_stride, h_col_stride, COMPUTE_DTYPE: tl.constexpr
    ):
        # (a, b): this tile's columns of h's first and second half (R, 2C), in COMPUTE_DTYPE.
        a_offsets = rows * h_row_stride + cols[None, :] * h_col_stride
        b_offsets = a_offsets + channels * h_col_stride
        a = tl.load(h_ptr + a_offsets, mask=mask, other=0.0).to(COMPUTE_DTYPE)
        b = tl.load(h_ptr + b_offsets, mask=mask, other=0.0).to(COMPUTE_DTYPE)
        return a, b

    @triton.jit
    def _glu_forward_kernel(
        h_ptr,
        out_ptr,
        num_rows,
        channels,
        h_row_stride,
        h_col_stride,
        BLOCK_ROWS: tl.constexpr,
        BLOCK_C: tl.constexpr,
        COMPUTE_DTYPE: tl.constexpr,
    ):
        # int64 row offsets: R * 2C passes 2**31 elements for long batches (e.g. 64 x 1500 frames x 2 x 11k).
        rows, cols, mask = row_tile(num_rows, channels, BLOCK_ROWS, BLOCK_C)  # (BLOCK_ROWS, 1), (BLOCK_C,)
        a, b = _load_halves(h_ptr, rows, cols, mask, channels, h_row_stride, h_col_stride, COMPUTE_DTYPE)
        out = a * tl.sigmoid(b)
        out_offsets = rows * channels + cols[None, :]  # out is freshly allocated, contiguous (R, C)
        tl.store(out_ptr + out_offsets, out.to(out_ptr.dtype.element_ty), mask=mask)

    @triton.jit
    def _glu_backward_kernel(
        grad_out_ptr,
        h_ptr,
        grad_h_ptr,
        num_rows,
        channels,
        grad_out_row_stride,
        grad_out_col_stride,
        h_row_stride,
        h_col_stride,
        BLOCK_ROWS: tl.constexpr,
        BLOCK_C: tl.constexpr,
        COMPUTE_DTYPE: tl.constexpr,
    ):
        rows, cols, mask = row_tile(num_rows, channels, BLOCK_ROWS, BLOCK_C)  # (BLOCK_ROWS, 1), (BLOCK_C,)
        grad_out_offsets = rows * grad_out_row_stride + cols[None, :] * grad_out_col_stride
        grad_out = tl.load(grad_out_ptr + grad_out_offsets, mask=mask, other=0.0).to(COMPUTE_DTYPE)
        a, b = _load_halves(h_ptr, rows, cols, mask, channels, h_row_stride, h_col_stride, COMPUTE_DTYPE)
        # Recomputed rather than saved: one more exp per element is cheaper than writing and re-reading R*C.
        sigmoid_b = tl.sigmoid(b)
        grad_a = grad_out * sigmoid_b
        grad_b = grad_a * a * (1.0 - sigmoid_b)
        grad_a_offsets = (
            rows * (2 * channels) + cols[None, :]
        )  # grad_h is freshly allocated, contiguous (R, 2C)
        grad_h_dtype = grad_h_ptr.dtype.element_ty
        tl.store(grad_h_ptr + grad_a_offsets, grad_a.to(grad_h_dtype), mask=mask)
        tl.store(grad_h_ptr + grad_a_offsets + channels, grad_b.to(grad_h_dtype), mask=mask)

    def launch_config(num_rows: int, num_cols: int) -> tuple[int, int, tuple[int, int]]:
        """(BLOCK_ROWS, BLOCK_COLS, grid) with this op's tile constants (``_tiles.row_tiles``)."""
        return row_tiles(num_rows, num_cols, _MAX_BLOCK_C, _TILE_ELEMENTS)


def _glu_forward(h: Tensor) -> Tensor:
    """GLU over the last dim of ``h`` (..., 2C) through the Triton kernel: a new contiguous (..., C); no
    dispatch, no checks."""
    channels = h.shape[-1] // 2
    out = h.new_empty((*h.shape[:-1], channels))
    if out.numel() == 0:
        return out
    h_rows = h.reshape(-1, 2 * channels)  # (R, 2C); a view whenever the leading dims can be flattened
    block_rows, block_c, grid = launch_config(h_rows.shape[0], channels)
    _glu_forward_kernel[grid](
        h_rows,
        out,
        h_rows.shape[0],
        channels,
        h_rows.stride(0),
        h_rows.stride(1),
        **row_meta(block_rows, block_c, h.dtype, _NUM_WARPS),
    )
    return out


def _glu_backward(grad_out: Tensor, h: Tensor) -> Tensor:
    """Launches the backward kernel; returns grad_h, a new contiguous tensor shaped like ``h``."""
    channels = h.shape[-1] // 2
    grad_h = torch.empty(h.shape, dtype=h.dtype, device=h.device)
    if grad_h.numel() == 0:
        return grad_h
    h_rows = h.reshape(-1, 2 * channels)  # (R, 2C)
    # (R, C); strides are passed through, so the stride-0 grad that .sum().backward() produces needs no copy.
    grad_out_rows = grad_out.reshape(-1, channels)
    block_rows, block_c, grid = launch_config(h_rows.shape[0], channels)
    _glu_backward_kernel[grid](
        grad_out_rows,
        h_rows,
        grad_h,
        h_rows.shape[0],
        channels,
        grad_out_rows.stride(0),
        grad_out_rows.stride(1),
        h_rows.stride(0),
        h_rows.stride(1),
        **row_meta(block_rows, block_c, h.dtype, _NUM_WARPS),
    )
    return grad_h


def _glu_setup_context(ctx, inputs: tuple[Tensor], output: Tensor) -> None:
    ctx.save_for_backward(inputs[0])


def _glu_kernel_backward(ctx, grad_out: Tensor) -> Tensor:
    (h,) = ctx.saved_tensors
    return _glu_backward_op(grad_out, h)


# The kernel path (``_kernel_op``): a custom op for torch.compile, differentiable through the backward, which
# saves only ``h``; eager calls skip the custom op's dispatch.
_glu_backward_op = KernelOp(
    "glu_backward",
    _glu_backward,
    lambda grad_out, h: torch.empty_like(h, memory_format=torch.contiguous_format),
)
glu_kernel = KernelOp(
    "glu",
    _glu_forward,
    lambda h: h.new_empty((*h.shape[:-1], h.shape[-1] // 2)),
    _glu_setup_context,
    _glu_kernel_backward,
)


def glu(h: Tensor, dim: int = -1) -> Tensor:
    """GLU, ``a * sigmoid(b)`` with ``a, b = h.chunk(2, dim)``: (..., 2C) -> (..., C) for the last dim.

    Runs the fused kernel when ``use_triton`` says so (``_dispatch``), ``dim`` is the last dim and ``h`` is
    floating point; otherwise ``glu_reference``. Raises ValueError when ``h`` has an odd size along ``dim``.
    """
    dim = _check_halvable(h, dim)
    supported = dim == h.ndim - 1 and h.dtype in _KERNEL_DTYPES
    if use_triton("glu", h, supported):
        return glu_kernel(h)
    return glu_reference(h, dim)


class GLU(nn.Module):
    """Drop-in for ``nn.GLU(dim)`` that uses the fused kernel for ``dim=-1``."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, h: Tensor) -> Tensor:
        return glu(h, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


def bench_case(batch: int, seq_len: int, channels: int, heads: int, dtype: torch.dtype, device) -> BenchCase:
    """The conv module's gate at the bench sizes: (B, T, 2C) -> (B, T, C)."""
    h = torch.randn(batch, seq_len, 2 * channels, dtype=dtype, device=device, requires_grad=True)
    out_bytes = h.numel() // 2 * h.element_size()
    # forward: read h, write out; backward: read grad_out and h, write grad_h
    return BenchCase(
        "glu",
        glu_reference,
        glu_kernel,
        (h,),
        tensor_bytes(h) + out_bytes,
        3 * tensor_bytes(h) + 2 * out_bytes,
    )
