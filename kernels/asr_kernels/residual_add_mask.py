"""ResidualAddMaskTime: ``out = x + scale * y`` with the padded frames zeroed, in one pass each way.

A residual connection ``x + f(x)`` (``y = f(x)``), optionally scaled, is followed in every encoder layer by the
length mask that keeps padded frames at zero (see mask_time.py for the convention: frame t of example b is
padding when ``t >= lengths[b]``). ``scale`` is a Python float, a 0-d tensor or a (C,) tensor, such as
Zipformer's learned per-channel bypass scale (``orig + scale * (x - orig)``: x = orig, y = x - orig); as a
tensor it gets its gradient, ``sum over b, t of grad_out * y`` at the real frames.

Eager runs three or four kernels (mul, add, the mask's compare, masked_fill) and autograd a further
three or four; the forward kernel reads x and y once and writes out once (padded frames are written without
being read), and the backward reads grad_out once, writes grad_x and grad_y, and reads y only when
``scale`` needs a gradient, which it reduces per tile to fp32 partial sums that the launcher adds up (no
atomics, so the result is deterministic). Backward saves ``lengths`` and ``scale``, plus ``y`` only for
``scale``'s gradient; never ``x``. Computes in fp32 (fp64 when an input is fp64).

The output dtype is x's (``residual_add_mask_time`` takes y in it), unless a (C,) ``scale`` of a wider dtype
promotes it as PyTorch's ``x + scale * y`` does (an fp32 parameter with bf16 activations gives fp32, as eager).

No module: the op has no state of its own; a learned ``scale`` belongs to the layer that owns it.

Dimension legend: B batch, T frames, C channels.
"""

from __future__ import annotations

import torch
from torch import Tensor

from asr_kernels._bench import BenchCase, tensor_bytes
from asr_kernels._dispatch import HAS_TRITON, use_triton
from asr_kernels._kernel_op import KernelOp
from asr_kernels.mask_time import check_frame_counts

# Dtypes the kernel handles (for x and y, which must share one, and for a tensor scale); anything else goes to
# the reference.
_KERNEL_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

# Tile shape, as in glu.py: up to _MAX_BLOCK_C channels by enough frames to fill _TILE_ELEMENTS (16 values per
# thread over 4 warps). The backward walks _BACKWARD_TILES tiles down T per program, so scale's partial sums
# (one fp32 row of C per program) add 1 / (_BACKWARD_TILES * BLOCK_T) of a tensor's traffic rather than 1 /
# BLOCK_T. Not yet tuned on a GPU: see docs/results/kernels.md once one is lent. The tests shrink all three.
_MAX_BLOCK_C = 1024
_TILE_ELEMENTS = 2048
_BACKWARD_TILES = 4
_NUM_WARPS = 4


def _check_inputs(x: Tensor, y: Tensor, lengths: Tensor, scale: float | Tensor) -> None:
    """Raises ValueError unless x, y are the same (B, T, C), lengths an integer (B,), scale a float, () or (C,)."""
    op = "residual_add_mask_time"
    if x.ndim != 3 or y.shape != x.shape:
        raise ValueError(
            f"{op} takes x and y of one shape (B, T, C), got x {tuple(x.shape)} and y {tuple(y.shape)}"
        )
    check_frame_counts(op, x, lengths)
    if isinstance(scale, Tensor):
        if scale.shape not in ((), (x.shape[2],)):
            raise ValueError(
                f"{op}: a tensor scale must be a scalar () or per channel ({x.shape[2]},) for x {tuple(x.shape)}, "
                f"got shape {tuple(scale.shape)}; reshape it, or pass a Python float"
            )
    elif isinstance(scale, bool) or not isinstance(scale, int | float):
        raise ValueError(f"{op}: scale must be a float or a tensor, got {type(scale).__name__}")


def residual_add_mask_time_reference(
    x: Tensor, y: Tensor, lengths: Tensor, scale: float | Tensor = 1.0
) -> Tensor:
    """Plain PyTorch ``(x + scale * y)`` with frames ``t >= lengths[b]`` zeroed; what the kernel must match."""
    _check_inputs(x, y, lengths, scale)
    frames = torch.arange(x.shape[1], device=x.device)  # (T,)
    padding = frames[None, :] >= lengths.to(x.device)[:, None]  # (B, T)
    # A Python scale rides in torch.add's alpha: one elementwise pass fewer than x + scale * y.
    total = x + scale * y if isinstance(scale, Tensor) else torch.add(x, y, alpha=scale)
    return total.masked_fill(padding[:, :, None], 0.0)


def _output_dtype(x: Tensor, y: Tensor, scale: Tensor) -> torch.dtype:
    # PyTorch's promotion for x + scale * y: a 0-d scale never widens y; a (C,) one does.
    return torch.promote_types(x.dtype, torch.result_type(scale, y))


if HAS_TRITON:
    import triton
    import triton.language as tl

    from asr_kernels._tiles import cdiv, compute_dtype, tile_sides, time_tile

    @triton.jit
    def _residual_add_mask_time_forward_kernel(
        x_ptr,
        y_ptr,
        scale_ptr,
        lengths_ptr,
        out_ptr,
        num_frames,
        channels,
        num_time_blocks,
        scale_stride,
        lengths_stride,
        x_batch_stride,
        x_time_stride,
        x_channel_stride,
        y_batch_stride,
        y_time_stride,
        y_channel_stride,
        BLOCK_T: tl.constexpr,
        BLOCK_C: tl.constexpr,
        COMPUTE_DTYPE: tl.constexpr,
    ):
        batch, frames, cols, in_bounds, real = time_tile(
            lengths_ptr, lengths_stride, num_frames, channels, num_time_blocks, BLOCK_T, BLOCK_C
        )  # frames (BLOCK_T, 1), cols (BLOCK_C,), masks (BLOCK_T, BLOCK_C)
        # A 0-d scale comes with stride 0: every channel reads the one value.
        scale = tl.load(scale_ptr + cols * scale_stride, mask=cols < channels, other=0.0).to(COMPUTE_DTYPE)
        x_offsets = batch * x_batch_stride + frames * x_time_stride + cols[None, :] * x_channel_stride
        y_offsets = batch * y_batch_stride + frames * y_time_stride + cols[None, :] * y_channel_stride
        # Padded frames are not loaded (other=0.0): their zeros cost a store, no read.
        x = tl.load(x_ptr + x_offsets, mask=real, other=0.0).to(COMPUTE_DTYPE)
        y = tl.load(y_ptr + y_offsets, mask=real, other=0.0).to(COMPUTE_DTYPE)
        out = x + scale[None, :] * y
        out_offsets = (batch * num_frames + frames) * channels + cols[None, :]  # fresh, contiguous (B, T, C)
        tl.store(out_ptr + out_offsets, out.to(out_ptr.dtype.element_ty), mask=in_bounds)

    @triton.jit
    def _residual_add_mask_time_backward_kernel(
        grad_out_ptr,
        y_ptr,
        scale_ptr,
        lengths_ptr,
        grad_x_ptr,
        grad_y_ptr,
        grad_scale_partials_ptr,
        num_frames,
        channels,
        num_time_chunks,
        scale_stride,
        lengths_stride,
        grad_out_batch_stride,
        grad_out_time_stride,
        grad_out_channel_stride,
        y_batch_stride,
        y_time_stride,
        y_channel_stride,
        BLOCK_T: tl.constexpr,
        BLOCK_C: tl.constexpr,
        TILES: tl.constexpr,
        GRAD_SCALE: tl.constexpr,
        COMPUTE_DTYPE: tl.constexpr,
    ):
        # Grid axis 0 runs over (batch, chunk of TILES time blocks) pairs; each program walks its chunk.
        batch = tl.program_id(0) // num_time_chunks
        first_frame = (tl.program_id(0) % num_time_chunks) * (TILES * BLOCK_T)
        cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)  # (BLOCK_C,)
        length = tl.load(lengths_ptr + batch * lengths_stride)
        scale = tl.load(scale_ptr + cols * scale_stride, mask=cols < channels, other=0.0).to(COMPUTE_DTYPE)
        grad_scale = tl.zeros((BLOCK_C,), dtype=COMPUTE_DTYPE)  # this program's share of sum(grad_out * y)
        batch = batch.to(tl.int64)
        for tile in range(TILES):
            frames = first_frame + tile * BLOCK_T + tl.arange(0, BLOCK_T)  # (BLOCK_T,)
            in_bounds = (frames < num_frames)[:, None] & (cols < channels)[None, :]  # (BLOCK_T, BLOCK_C)
            real = in_bounds & (frames < length)[:, None]
            frames = frames.to(tl.int64)[:, None]
            grad_out_offsets = (
                batch * grad_out_batch_stride
                + frames * grad_out_time_stride
                + cols[None, :] * grad_out_channel_stride
            )
            grad_out = tl.load(grad_out_ptr + grad_out_offsets, mask=real, other=0.0).to(COMPUTE_DTYPE)
            grad_offsets = (batch * num_frames + frames) * channels + cols[None, :]  # fresh, contiguous
            tl.store(grad_x_ptr + grad_offsets, grad_out.to(grad_x_ptr.dtype.element_ty), mask=in_bounds)
            grad_y = scale[None, :] * grad_out
            tl.store(grad_y_ptr + grad_offsets, grad_y.to(grad_y_ptr.dtype.element_ty), mask=in_bounds)
            if GRAD_SCALE:
                y_offsets = batch * y_batch_stride + frames * y_time_stride + cols[None, :] * y_channel_stride
                y = tl.load(y_ptr + y_offsets, mask=real, other=0.0).to(COMPUTE_DTYPE)
                grad_scale += tl.sum(grad_out * y, axis=0)
        if GRAD_SCALE:
            partial_offsets = tl.program_id(0).to(tl.int64) * channels + cols
            tl.store(grad_scale_partials_ptr + partial_offsets, grad_scale, mask=cols < channels)

    def launch_config(num_frames: int, channels: int, tiles: int) -> tuple[int, int, int]:
        """(BLOCK_T, BLOCK_C, number of time chunks of ``tiles`` blocks each)."""
        block_c, block_t = tile_sides(channels, num_frames, _MAX_BLOCK_C, _TILE_ELEMENTS)
        return block_t, block_c, cdiv(num_frames, block_t * tiles)


def _scale_stride(scale: Tensor) -> int:
    return scale.stride(0) if scale.ndim else 0


def _residual_add_mask_time_forward(x: Tensor, y: Tensor, lengths: Tensor, scale: Tensor) -> Tensor:
    """``x + scale * y`` masked by ``lengths`` through the Triton kernel: a new contiguous (B, T, C); no
    dispatch, no checks. ``scale`` is a tensor of shape () or (C,) on x's device; x and y share one dtype."""
    out = torch.empty(x.shape, dtype=_output_dtype(x, y, scale), device=x.device)
    if out.numel() == 0:
        return out
    batch, num_frames, channels = x.shape
    block_t, block_c, num_time_blocks = launch_config(num_frames, channels, tiles=1)
    grid = (batch * num_time_blocks, cdiv(channels, block_c))
    _residual_add_mask_time_forward_kernel[grid](
        x,
        y,
        scale,
        lengths,
        out,
        num_frames,
        channels,
        num_time_blocks,
        _scale_stride(scale),
        lengths.stride(0),
        *x.stride(),
        *y.stride(),
        BLOCK_T=block_t,
        BLOCK_C=block_c,
        COMPUTE_DTYPE=compute_dtype(x.dtype, y.dtype, scale.dtype),
        num_warps=_NUM_WARPS,
    )
    return out


def _residual_add_mask_time_backward(
    grad_out: Tensor, lengths: Tensor, scale: Tensor, y: Tensor | None, input_dtype: torch.dtype
) -> tuple[Tensor, Tensor, Tensor]:
    """Launches the backward kernel; returns (grad_x, grad_y, grad_scale), the last zeros when ``y`` is None
    (no gradient wanted for ``scale``)."""
    grad_x = torch.empty(grad_out.shape, dtype=input_dtype, device=grad_out.device)
    grad_y = torch.empty_like(grad_x)
    if grad_x.numel() == 0:
        return grad_x, grad_y, torch.zeros_like(scale)
    batch, num_frames, channels = grad_out.shape
    block_t, block_c, num_time_chunks = launch_config(num_frames, channels, _BACKWARD_TILES)
    grid = (batch * num_time_chunks, cdiv(channels, block_c))
    math_dtype = compute_dtype(grad_out.dtype, scale.dtype, input_dtype)
    # One row of C partial sums per program along grid axis 0, in the compute dtype.
    partials_dtype = torch.float64 if math_dtype == tl.float64 else torch.float32
    partials = grad_out.new_empty((grid[0], channels) if y is not None else (0,), dtype=partials_dtype)
    y_or_unused = y if y is not None else grad_out  # not read when GRAD_SCALE is False
    _residual_add_mask_time_backward_kernel[grid](
        grad_out,
        y_or_unused,
        scale,
        lengths,
        grad_x,
        grad_y,
        partials,
        num_frames,
        channels,
        num_time_chunks,
        _scale_stride(scale),
        lengths.stride(0),
        *grad_out.stride(),
        *y_or_unused.stride(),
        BLOCK_T=block_t,
        BLOCK_C=block_c,
        TILES=_BACKWARD_TILES,
        GRAD_SCALE=y is not None,
        COMPUTE_DTYPE=math_dtype,
        num_warps=_NUM_WARPS,
    )
    if y is None:
        return grad_x, grad_y, torch.zeros_like(scale)
    grad_scale = partials.sum(dim=0)  # (C,)
    if scale.ndim == 0:
        grad_scale = grad_scale.sum()
    return grad_x, grad_y, grad_scale.to(scale.dtype)


def _sum_like(x: Tensor, y: Tensor, lengths: Tensor, scale: Tensor) -> Tensor:
    return torch.empty(x.shape, dtype=_output_dtype(x, y, scale), device=x.device)


def _grads_like(
    grad_out: Tensor, lengths: Tensor, scale: Tensor, y: Tensor | None, input_dtype: torch.dtype
) -> tuple[Tensor, Tensor, Tensor]:
    grad_x = torch.empty(grad_out.shape, dtype=input_dtype, device=grad_out.device)
    return grad_x, torch.empty_like(grad_x), torch.empty_like(scale)


def _residual_add_mask_time_setup_context(ctx, inputs: tuple[Tensor, Tensor, Tensor, Tensor], output) -> None:
    x, y, lengths, scale = inputs
    # grad_x and grad_y need only the mask and scale; y is kept only for scale's gradient, sum(grad_out * y).
    ctx.input_dtype = x.dtype
    ctx.save_for_backward(lengths, scale, y if ctx.needs_input_grad[3] else None)


def _residual_add_mask_time_kernel_backward(ctx, grad_out: Tensor):
    lengths, scale, y = ctx.saved_tensors
    grad_x, grad_y, grad_scale = _residual_add_mask_time_backward_op(
        grad_out, lengths, scale, y, ctx.input_dtype
    )
    return grad_x, grad_y, None, grad_scale if y is not None else None


# The kernel path (``_kernel_op``): a custom op for torch.compile, differentiable through the backward; eager
# calls skip the custom op's dispatch.
_residual_add_mask_time_backward_op = KernelOp(
    "residual_add_mask_time_backward", _residual_add_mask_time_backward, _grads_like
)
residual_add_mask_time_kernel = KernelOp(
    "residual_add_mask_time",
    _residual_add_mask_time_forward,
    _sum_like,
    _residual_add_mask_time_setup_context,
    _residual_add_mask_time_kernel_backward,
)


def residual_add_mask_time(x: Tensor, y: Tensor, lengths: Tensor, scale: float | Tensor = 1.0) -> Tensor:
    """``x + scale * y`` for x, y (B, T, C), with every frame ``t >= lengths[b]`` zeroed.

    ``scale``: a Python float, or a tensor of shape () or (C,) (gets its gradient, reduced over B and T);
    ``lengths``: (B,) integer frame counts, moved to x's device if needed. Runs the fused kernel when
    ``use_triton`` says so (``_dispatch``), x is floating and a tensor ``scale`` is floating and on x's device;
    otherwise ``residual_add_mask_time_reference``. Raises ValueError for shapes or dtypes that do not fit.

    y joins in x's dtype, the residual stream's (what the models cast every branch to before): a narrower y (a
    bf16 branch onto a float32 stream under autocast) is read as it is by the reference, whose promotion gives
    x's dtype, and cast for the kernel, which takes one dtype; any other floating y (wider, or fp16 onto bf16) is
    cast to x's dtype first. Reading the narrower branch as it is saves a pass per residual over casting it first
    (benchmarks/bench_forward_bytes.py).
    """
    _check_inputs(x, y, lengths, scale)
    lengths = lengths.to(x.device)
    scale_is_tensor = isinstance(scale, Tensor)
    floating = x.is_floating_point() and y.is_floating_point()
    if floating and torch.promote_types(x.dtype, y.dtype) != x.dtype:
        y = y.to(x.dtype)
    supported = (
        x.dtype in _KERNEL_DTYPES
        and floating
        and (not scale_is_tensor or (scale.dtype in _KERNEL_DTYPES and scale.device == x.device))
    )
    if use_triton("residual_add_mask_time", x, supported):
        y = y.to(x.dtype)
        if not scale_is_tensor:
            # A Python number as eager uses it: rounded to fp32, the math type of fp32, bf16 and fp16 ops (fp64
            # for fp64). A 0-d tensor does not change the output dtype. One tiny fill, no host-device copy.
            scale_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
            scale = torch.full((), scale, dtype=scale_dtype, device=x.device)
        return residual_add_mask_time_kernel(x, y, lengths, scale)
    return residual_add_mask_time_reference(x, y, lengths, scale)


def bench_case(batch: int, seq_len: int, channels: int, heads: int, dtype: torch.dtype, device) -> BenchCase:
    """Zipformer's bypass on an encoder activation: x, y (B, T, C) and a learned (C,) scale that gets its
    gradient. Every frame is real, so the GB/s counts only bytes the kernel moves (it skips reading padded
    frames, which would flatter it against the byte count below)."""
    x = torch.randn(batch, seq_len, channels, dtype=dtype, device=device, requires_grad=True)
    y = torch.randn(batch, seq_len, channels, dtype=dtype, device=device, requires_grad=True)
    lengths = torch.full((batch,), seq_len, dtype=torch.int64, device=device)
    scale = torch.full((channels,), 0.5, dtype=dtype, device=device, requires_grad=True)
    # forward: read x and y, write out; backward: read grad_out and y, write grad_x and grad_y (scale: C values)
    return BenchCase(
        "residual_add_mask_time",
        residual_add_mask_time_reference,
        residual_add_mask_time_kernel,
        (x, y, lengths, scale),
        3 * tensor_bytes(x),
        7 * tensor_bytes(x),
    )
