"""SwooshL and SwooshR, Zipformer's activations (Yao et al., 2023, "Zipformer: A faster and better encoder
for automatic speech recognition", §3.4; icefall ``zipformer/scaling.py``), as one fused kernel each way.

    SwooshL(x) = log(1 + e^(x-4)) - 0.08 x - 0.035
    SwooshR(x) = log(1 + e^(x-1)) - 0.08 x - 0.313261687

Swish has a vanishing slope for negative inputs, so with Adam a neuron pushed far below zero stops
learning; Swoosh keeps a slope of -0.08 there. The offsets make SwooshR(0) = 0 (it follows convolutions)
and put SwooshL's zero near the origin (it follows the feed-forward in-projections, where the paper found a
right-shifted curve better). ``log(1 + e^z)`` is ``softplus``, which PyTorch evaluates stably for any z.

``form="sigmoid"`` gives the reference trainer's variant instead, x * sigmoid(x - 4) and x * sigmoid(x - 1):
shifted Swish, a *different* function (it goes to 0, not to +0.08|x|, as x -> -inf; at x = -10 SwooshL is
0.765 and its sigmoid form -8e-6). It exists so checkpoints from that trainer can be reproduced.

The kernel views ``x`` as rows (every leading dim flattened) of its last dim, reads each value once, computes
in fp32 (fp64 for fp64 input) and writes the output once. Backward saves only ``x`` and recomputes the slope
(with z = x - shift and s = sigmoid(z)):

    paper:   d/dx = s - 0.08
    sigmoid: d/dx = s + x * s * (1 - s)

Both are evaluated from e = exp(-|z|), which never overflows: softplus(z) = max(z, 0) + log1p(e) and
s = 1 / (1 + e) for z >= 0, e / (1 + e) below; so x = +-1e4 gives finite values and slopes (a naive
log(1 + exp(z)) is inf from z = 89 in fp32). What this buys over the references: one read and one write each
way instead of three to five elementwise kernels, and no saved ``sigmoid``/``softplus`` intermediates.

Dimension legend: R rows (all leading dims flattened), C the last dim.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from asr_kernels._bench import BenchCase, tensor_bytes
from asr_kernels._dispatch import HAS_TRITON, use_triton
from asr_kernels._kernel_op import KernelOp
from asr_kernels._precision import in_input_dtype

SWOOSH_FORMS = ("paper", "sigmoid")

# Dtypes the kernel handles; anything else (integers, complex) goes to the reference, which raises as
# F.softplus / torch.sigmoid do.
_KERNEL_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

# The paper's constants, per side: (shift, offset); the slope 0.08 is shared. The references below spell the
# same numbers out literally, as src/asr_pipeline/modules/swoosh.py did, so the reference path is bit-for-bit
# the one the models used before the kernels. They add -0.08 x where that subtracted 0.08 x: the same values
# (negation is exact; only a NaN's sign may differ), but autograd passes the gradient through a sum and negates
# it for a difference, one full-size pass per call in the backward.
_SHIFT_AND_OFFSET = {"l": (4.0, 0.035), "r": (1.0, 0.313261687)}

# Tile shape, as in glu.py: up to _MAX_BLOCK_C channels by enough rows to fill _TILE_ELEMENTS (16 values per
# thread over 4 warps). Not yet tuned on a GPU: see docs/results/kernels.md once one is lent. The tests shrink
# both to force ragged tiles.
_MAX_BLOCK_C = 1024
_TILE_ELEMENTS = 2048
_NUM_WARPS = 4


def _check_form(form: str) -> None:
    if form not in SWOOSH_FORMS:
        raise ValueError(
            f"Swoosh form must be one of {SWOOSH_FORMS} (the paper's softplus form or the reference "
            f"trainer's x * sigmoid(x - shift)), got {form!r}"
        )


def swoosh_l_reference(x: Tensor, form: str = "paper") -> Tensor:
    """Plain PyTorch SwooshL in x's dtype, also under autocast, as the kernel and icefall's SwooshL return it
    (autocast would run softplus and all after it in float32: ~40 % of Zipformer-M's eager bf16 forward bytes
    went to the two Swooshes that way; ``_precision``); what the kernel must match."""
    _check_form(form)
    if form == "sigmoid":
        return x * (x - 4.0).sigmoid()
    return in_input_dtype(F.softplus, x - 4.0) + -0.08 * x - 0.035


def swoosh_r_reference(x: Tensor, form: str = "paper") -> Tensor:
    """Plain PyTorch SwooshR in x's dtype (also under autocast); what the kernel must match."""
    _check_form(form)
    if form == "sigmoid":
        return x * (x - 1.0).sigmoid()
    return in_input_dtype(F.softplus, x - 1.0) + -0.08 * x - 0.313261687


if HAS_TRITON:
    import triton
    import triton.language as tl

    from asr_kernels._tiles import row_meta, row_tile, row_tiles

    @triton.jit
    def _exp_minus_abs(z):
        # exp(-|z|) lies in (0, 1]: the one exponential both softplus and sigmoid are built from, never inf.
        return tl.exp(-tl.abs(z))

    @triton.jit
    def _log1p(e):
        # log(1 + e) for e in [0, 1] to a few ulp without libdevice (which the interpreter lacks): u = 1 + e
        # rounds e away, u - 1 is exact, and log(u) * e / (u - 1) puts the lost part back (Goldberg, 1991,
        # "What every computer scientist should know about floating-point arithmetic", Thm. 4). Plain
        # log(1 + e) loses up to eps / 2 absolute, which matters where SwooshL crosses zero (x = -0.26):
        # measured in fp32 over x in [-3, 3], max error vs fp64 8.4e-8 plain, 5.1e-8 this way (eager: 4.0e-8).
        u = 1.0 + e
        rounded = u - 1.0
        exact = rounded == 0.0  # e below eps / 2: log1p(e) = e to working precision
        return tl.where(exact, e, tl.log(u) * (e / tl.where(exact, 1.0, rounded)))

    @triton.jit
    def _softplus(z, e):
        # log(1 + e^z) = max(z, 0) + log(1 + e^-|z|), from e = exp(-|z|): no overflow for any z.
        return tl.maximum(z, 0.0) + _log1p(e)

    @triton.jit
    def _sigmoid(z, e):
        # sigmoid(z) from e = exp(-|z|), without the exp(-z) overflow of 1 / (1 + exp(-z)) for z << 0.
        return tl.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))

    @triton.jit
    def _swoosh_forward_kernel(
        x_ptr,
        out_ptr,
        num_rows,
        channels,
        x_row_stride,
        x_col_stride,
        SHIFT: tl.constexpr,
        OFFSET: tl.constexpr,
        SIGMOID_FORM: tl.constexpr,
        BLOCK_ROWS: tl.constexpr,
        BLOCK_C: tl.constexpr,
        COMPUTE_DTYPE: tl.constexpr,
    ):
        rows, cols, mask = row_tile(num_rows, channels, BLOCK_ROWS, BLOCK_C)  # (BLOCK_ROWS, 1), (BLOCK_C,)
        x = tl.load(x_ptr + rows * x_row_stride + cols[None, :] * x_col_stride, mask=mask, other=0.0)
        x = x.to(COMPUTE_DTYPE)
        z = x - SHIFT
        e = _exp_minus_abs(z)
        out = x * _sigmoid(z, e) if SIGMOID_FORM else _softplus(z, e) - 0.08 * x - OFFSET
        out_offsets = rows * channels + cols[None, :]  # out is freshly allocated, contiguous (R, C)
        tl.store(out_ptr + out_offsets, out.to(out_ptr.dtype.element_ty), mask=mask)

    @triton.jit
    def _swoosh_backward_kernel(
        grad_out_ptr,
        x_ptr,
        grad_x_ptr,
        num_rows,
        channels,
        grad_out_row_stride,
        grad_out_col_stride,
        x_row_stride,
        x_col_stride,
        SHIFT: tl.constexpr,
        SIGMOID_FORM: tl.constexpr,
        BLOCK_ROWS: tl.constexpr,
        BLOCK_C: tl.constexpr,
        COMPUTE_DTYPE: tl.constexpr,
    ):
        rows, cols, mask = row_tile(num_rows, channels, BLOCK_ROWS, BLOCK_C)  # (BLOCK_ROWS, 1), (BLOCK_C,)
        grad_out_offsets = rows * grad_out_row_stride + cols[None, :] * grad_out_col_stride
        grad_out = tl.load(grad_out_ptr + grad_out_offsets, mask=mask, other=0.0).to(COMPUTE_DTYPE)
        x = tl.load(x_ptr + rows * x_row_stride + cols[None, :] * x_col_stride, mask=mask, other=0.0)
        x = x.to(COMPUTE_DTYPE)
        # Recomputed rather than saved: one more exp per element is cheaper than writing and re-reading R*C.
        z = x - SHIFT
        sigmoid_z = _sigmoid(z, _exp_minus_abs(z))
        slope = sigmoid_z + x * sigmoid_z * (1.0 - sigmoid_z) if SIGMOID_FORM else sigmoid_z - 0.08
        grad_x_offsets = rows * channels + cols[None, :]  # grad_x is freshly allocated, contiguous (R, C)
        tl.store(grad_x_ptr + grad_x_offsets, (grad_out * slope).to(grad_x_ptr.dtype.element_ty), mask=mask)

    def launch_config(num_rows: int, num_cols: int) -> tuple[int, int, tuple[int, int]]:
        """(BLOCK_ROWS, BLOCK_COLS, grid) with this op's tile constants (``_tiles.row_tiles``)."""
        return row_tiles(num_rows, num_cols, _MAX_BLOCK_C, _TILE_ELEMENTS)


def _as_rows(t: Tensor) -> Tensor:
    """(R, C) over the last dim; a view whenever the leading dims can be flattened. A 0-d tensor is (1, 1)."""
    return t.reshape(-1, t.shape[-1]) if t.ndim else t.reshape(1, 1)


def _swoosh_forward(x: Tensor, side: str, form: str) -> Tensor:
    """Launches the forward kernel on ``x``; returns a new contiguous tensor of its shape."""
    out = x.new_empty(x.shape)
    if out.numel() == 0:
        return out
    x_rows = _as_rows(x)  # (R, C)
    shift, offset = _SHIFT_AND_OFFSET[side]
    block_rows, block_c, grid = launch_config(*x_rows.shape)
    _swoosh_forward_kernel[grid](
        x_rows,
        out,
        x_rows.shape[0],
        x_rows.shape[1],
        x_rows.stride(0),
        x_rows.stride(1),
        SHIFT=shift,
        OFFSET=offset,
        SIGMOID_FORM=form == "sigmoid",
        **row_meta(block_rows, block_c, x.dtype, _NUM_WARPS),
    )
    return out


def _swoosh_backward(grad_out: Tensor, x: Tensor, side: str, form: str) -> Tensor:
    """Launches the backward kernel; returns grad_x, a new contiguous tensor shaped like ``x``."""
    grad_x = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if grad_x.numel() == 0:
        return grad_x
    x_rows = _as_rows(x)  # (R, C)
    # Strides are passed through, so the stride-0 grad that .sum().backward() produces needs no copy.
    grad_out_rows = _as_rows(grad_out)  # (R, C)
    block_rows, block_c, grid = launch_config(*x_rows.shape)
    _swoosh_backward_kernel[grid](
        grad_out_rows,
        x_rows,
        grad_x,
        x_rows.shape[0],
        x_rows.shape[1],
        grad_out_rows.stride(0),
        grad_out_rows.stride(1),
        x_rows.stride(0),
        x_rows.stride(1),
        SHIFT=_SHIFT_AND_OFFSET[side][0],
        SIGMOID_FORM=form == "sigmoid",
        **row_meta(block_rows, block_c, x.dtype, _NUM_WARPS),
    )
    return grad_x


def _swoosh_l(x: Tensor, form: str) -> Tensor:
    """SwooshL through the Triton kernels (forward and backward); no dispatch, no checks."""
    return _swoosh_forward(x, "l", form)


def _swoosh_r(x: Tensor, form: str) -> Tensor:
    """SwooshR through the Triton kernels (forward and backward); no dispatch, no checks."""
    return _swoosh_forward(x, "r", form)


def _swoosh_like_x(x: Tensor, *_) -> Tensor:
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _swoosh_setup_context(ctx, inputs: tuple[Tensor, str], output: Tensor) -> None:
    x, form = inputs
    ctx.form = form
    ctx.save_for_backward(x)


def _swoosh_l_kernel_backward(ctx, grad_out: Tensor) -> tuple[Tensor, None]:
    (x,) = ctx.saved_tensors
    return _swoosh_backward_op(grad_out, x, "l", ctx.form), None


def _swoosh_r_kernel_backward(ctx, grad_out: Tensor) -> tuple[Tensor, None]:
    (x,) = ctx.saved_tensors
    return _swoosh_backward_op(grad_out, x, "r", ctx.form), None


# The kernel path (``_kernel_op``): custom ops for torch.compile, differentiable through the backward, which
# saves only ``x``; eager calls skip the custom ops' dispatch.
_swoosh_backward_op = KernelOp(
    "swoosh_backward", _swoosh_backward, lambda grad_out, x, side, form: _swoosh_like_x(x)
)
swoosh_l_kernel = KernelOp(
    "swoosh_l", _swoosh_l, _swoosh_like_x, _swoosh_setup_context, _swoosh_l_kernel_backward
)
swoosh_r_kernel = KernelOp(
    "swoosh_r", _swoosh_r, _swoosh_like_x, _swoosh_setup_context, _swoosh_r_kernel_backward
)


def swoosh_l(x: Tensor, form: str = "paper") -> Tensor:
    """SwooshL(x), elementwise on any shape; ``form`` "paper" (softplus) or "sigmoid" (x * sigmoid(x - 4)).

    Runs the fused kernel when ``use_triton`` says so (``_dispatch``) and ``x`` is floating point; otherwise
    ``swoosh_l_reference``. Raises ValueError for an unknown ``form``.
    """
    _check_form(form)
    if use_triton("swoosh_l", x, x.dtype in _KERNEL_DTYPES):
        return swoosh_l_kernel(x, form)
    return swoosh_l_reference(x, form)


def swoosh_r(x: Tensor, form: str = "paper") -> Tensor:
    """SwooshR(x), elementwise on any shape; ``form`` "paper" (softplus) or "sigmoid" (x * sigmoid(x - 1)).

    Runs the fused kernel when ``use_triton`` says so (``_dispatch``) and ``x`` is floating point; otherwise
    ``swoosh_r_reference``. Raises ValueError for an unknown ``form``.
    """
    _check_form(form)
    if use_triton("swoosh_r", x, x.dtype in _KERNEL_DTYPES):
        return swoosh_r_kernel(x, form)
    return swoosh_r_reference(x, form)


class Swoosh(nn.Module):
    """``side`` "l" or "r"; ``form`` "paper" (the formulas above) or "sigmoid" (x * sigmoid(x - shift))."""

    def __init__(self, side: str, form: str = "paper") -> None:
        super().__init__()
        if side not in ("l", "r"):
            raise ValueError(f"Swoosh side must be 'l' or 'r', got {side!r}")
        if form not in SWOOSH_FORMS:
            raise ValueError(f"Swoosh form must be one of {SWOOSH_FORMS}, got {form!r}")
        self.side, self.form = side, form
        self.shift = _SHIFT_AND_OFFSET[side][0]

    def forward(self, x: Tensor) -> Tensor:
        return swoosh_l(x, self.form) if self.side == "l" else swoosh_r(x, self.form)

    def extra_repr(self) -> str:
        return f"side={self.side!r}, form={self.form!r}"


def bench_case(batch: int, seq_len: int, channels: int, heads: int, dtype: torch.dtype, device) -> BenchCase:
    """SwooshL (paper form) on the feed-forward hidden (B, T, 3C): Zipformer's feedforward_dim is ~3x its
    encoder_dim (1536 at 512), and its three feed-forward modules per layer make it the busiest Swoosh."""
    x = torch.randn(batch, seq_len, 3 * channels, dtype=dtype, device=device, requires_grad=True)
    # forward: read x, write out; backward: read grad_out and x, write grad_x
    return BenchCase(
        "swoosh_l",
        swoosh_l_reference,
        swoosh_l_kernel,
        (x, "paper"),
        2 * tensor_bytes(x),
        5 * tensor_bytes(x),
    )


def bench_cases(
    batch: int, seq_len: int, channels: int, heads: int, dtype: torch.dtype, device
) -> list[BenchCase]:
    """``bench_case`` (SwooshL) and SwooshR on the conv module's (B, T, C), where Zipformer applies it."""
    x = torch.randn(batch, seq_len, channels, dtype=dtype, device=device, requires_grad=True)
    swoosh_r_case = BenchCase(
        "swoosh_r",
        swoosh_r_reference,
        swoosh_r_kernel,
        (x, "paper"),
        2 * tensor_bytes(x),
        5 * tensor_bytes(x),
    )
    return [bench_case(batch, seq_len, channels, heads, dtype, device), swoosh_r_case]
