"""Zipformer's downsampling between stacks (Yao et al., 2023, §3.1; icefall's ``SimpleDownsample``), fused and
aware of padding: ``factor`` consecutive frames averaged with learned softmax weights over their real frames.

With p = softmax(weights) over the ``factor`` positions of a group and m[b, t] = 1 on real frames
(t < lengths[b]), 0 on padding and past T:

    out[b, k] = sum_f p_f m[b, kf+f] x[b, kf+f]  /  sum_f p_f m[b, kf+f]        (0 when the group has no real frame)

(B, T, D) -> (B, ceil(T / factor), D). Renormalising over the real frames makes a padded batch compute what
each utterance computes alone, without touching the padding.

How it differs from ``SimpleDownsample`` (``src/asr_pipeline/modules/zipformer_subsampling.py``), which
instead replaces every frame past an utterance's end by its last real frame: for a group with r real frames,
1 <= r < factor, SimpleDownsample gives the last real frame the weight of the r..factor-1 positions too,
``sum_{f<r-1} p_f x_f + (sum_{f>=r-1} p_f) x_{r-1}``, while this op gives ``sum_{f<r} p_f x_f / sum_{f<r} p_f``.
For factor 2 the only such group has r = 1 and both give x_0, so on every group with a real frame the two
agree; for factor >= 3 a group with 2 <= r < factor differs (the tests show one). Groups with no real frame
(outputs that are padding at the lower rate) give 0 here and the last real frame's value there.

The kernel reads each group's real frames once, computes the softmax of the weights and the mask-normalised
average in fp32 (fp64 for fp64 input) and writes one output frame; the reference pads, masks and runs an
einsum. Backward saves x, lengths and weights (nothing of the output) and, per group, writes

    grad_x[b, kf+f] = p_f m / S * grad_out[b, k]                       S = sum_f p_f m[b, kf+f]
    dL/dp_f += m / S * <grad_out[b, k], x[b, kf+f] - out[b, k]>       (out recomputed, one D-block at a time)

as per-program partial sums that a sum and the softmax Jacobian turn into grad_weights on the host
(deterministic, unlike atomics).

Dimension legend: B batch, T input frames, K = ceil(T / factor) output frames, D channels, F factor.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from asr_kernels._bench import BenchCase, tensor_bytes
from asr_kernels._dispatch import HAS_TRITON, use_triton
from asr_kernels._kernel_op import KernelOp

_KERNEL_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_LENGTH_DTYPES = (torch.int32, torch.int64)

# Tile: one output frame per program, its group of F frames by up to _TILE_ELEMENTS // F channels (4096 values
# over 4 warps, 32 per thread: every x value is read once, so a program holds a whole group of a wide frame).
# Not yet tuned on a GPU; the tests shrink it to force ragged channel tiles.
_TILE_ELEMENTS = 4096
_NUM_WARPS = 4


def _check_inputs(x: Tensor, lengths: Tensor, weights: Tensor) -> int:
    """Returns the factor; raises unless x is (B, T, D), lengths (B,) and weights (F,) with F >= 1."""
    if x.ndim != 3:
        raise ValueError(f"pairwise_downsample needs x of shape (B, T, D), got {tuple(x.shape)}")
    if lengths.shape != (x.shape[0],):
        raise ValueError(
            f"pairwise_downsample needs lengths of shape (B,) = ({x.shape[0]},) for x of shape "
            f"{tuple(x.shape)}, got {tuple(lengths.shape)}"
        )
    if weights.ndim != 1 or weights.numel() == 0:
        raise ValueError(
            f"pairwise_downsample needs one weight logit per frame of a group, shape (factor,) with factor >= 1, "
            f"got {tuple(weights.shape)}"
        )
    return weights.shape[0]


def pairwise_downsample_reference(x: Tensor, lengths: Tensor, weights: Tensor) -> Tensor:
    """Plain-PyTorch mask-normalised softmax-weighted average of ``factor`` frames; what the kernel must match."""
    factor = _check_inputs(x, lengths, weights)
    batch, frames, channels = x.shape
    out_frames = -(-frames // factor)  # K
    positions = torch.arange(out_frames * factor, device=x.device)  # (K F,)
    real = (positions[None, :] < lengths[:, None]) & (positions < frames)[None, :]  # (B, K F)
    x = F.pad(x, (0, 0, 0, out_frames * factor - frames))  # (B, K F, D)
    x = x.masked_fill(~real[..., None], 0.0)  # padding never reaches the output, even NaN
    coefficients = weights.softmax(dim=0).to(x.dtype) * real.view(batch, out_frames, factor)  # (B, K, F)
    total = coefficients.sum(dim=-1, keepdim=True)  # (B, K, 1)
    # A group with no real frame has total 0 and coefficients 0: divide by 1 instead, giving 0 and no NaN grad.
    coefficients = coefficients / torch.where(total > 0, total, torch.ones_like(total))
    return torch.einsum("bkfd,bkf->bkd", x.view(batch, out_frames, factor, channels), coefficients)


if HAS_TRITON:
    import triton
    import triton.language as tl

    from asr_kernels._tiles import cdiv, compute_dtype, next_power_of_2

    @triton.jit
    def _group_coefficients(
        lengths_ptr,
        weights_ptr,
        batch,
        group,
        num_frames,
        factor,
        lengths_stride,
        weights_stride,
        BLOCK_F: tl.constexpr,
        COMPUTE_DTYPE: tl.constexpr,
    ):
        """(frames, real, coefficients, inverse total) of group ``group`` of example ``batch``: frames, real and
        coefficients (BLOCK_F,), coefficient = p_f m / S; the scalar 1 / S (1 for a group with no real frame)."""
        slots = tl.arange(0, BLOCK_F)  # f
        in_group = slots < factor
        logits = tl.load(weights_ptr + slots * weights_stride, mask=in_group, other=float("-inf"))
        logits = logits.to(COMPUTE_DTYPE)
        exps = tl.exp(logits - tl.max(logits, axis=0))  # softmax, max-shifted so exp never overflows
        probs = exps / tl.sum(exps, axis=0)
        length = tl.load(lengths_ptr + batch * lengths_stride)
        frames = group * factor + slots  # t = kF + f
        real = in_group & (frames < length) & (frames < num_frames)
        weighted = tl.where(real, probs, 0.0)
        total = tl.sum(weighted, axis=0)
        # A group with no real frame has total 0: dividing by 1 instead keeps its coefficients (all 0) finite.
        inverse_total = 1.0 / tl.where(total > 0, total, 1.0)
        return frames, real, weighted * inverse_total, inverse_total

    @triton.jit
    def _pairwise_downsample_forward_kernel(
        x_ptr,
        lengths_ptr,
        weights_ptr,
        out_ptr,
        num_out_frames,
        num_frames,
        channels,
        factor,
        x_batch_stride,
        x_frame_stride,
        x_channel_stride,
        lengths_stride,
        weights_stride,
        BLOCK_F: tl.constexpr,
        BLOCK_D: tl.constexpr,
        COMPUTE_DTYPE: tl.constexpr,
    ):
        row = tl.program_id(0).to(tl.int64)  # b * K + k: one output frame
        batch = row // num_out_frames
        group = row % num_out_frames
        cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)  # (BLOCK_D,) channel d
        col_in_range = cols < channels
        frames, real, coefficients, _ = _group_coefficients(
            lengths_ptr,
            weights_ptr,
            batch,
            group,
            num_frames,
            factor,
            lengths_stride,
            weights_stride,
            BLOCK_F,
            COMPUTE_DTYPE,
        )
        x_offsets = (
            batch * x_batch_stride + frames[:, None] * x_frame_stride + cols[None, :] * x_channel_stride
        )
        # Padded frames are never read: they cannot reach the output, whatever they hold.
        x = tl.load(x_ptr + x_offsets, mask=real[:, None] & col_in_range[None, :], other=0.0)
        out = tl.sum(coefficients[:, None] * x.to(COMPUTE_DTYPE), axis=0)  # (BLOCK_D,)
        out_offsets = row * channels + cols  # out is freshly allocated, contiguous (B K, D)
        tl.store(out_ptr + out_offsets, out.to(out_ptr.dtype.element_ty), mask=col_in_range)

    @triton.jit
    def _pairwise_downsample_backward_kernel(
        grad_out_ptr,
        x_ptr,
        lengths_ptr,
        weights_ptr,
        grad_x_ptr,
        grad_probs_partial_ptr,
        num_out_frames,
        num_frames,
        channels,
        factor,
        grad_out_batch_stride,
        grad_out_frame_stride,
        grad_out_channel_stride,
        x_batch_stride,
        x_frame_stride,
        x_channel_stride,
        lengths_stride,
        weights_stride,
        BLOCK_F: tl.constexpr,
        BLOCK_D: tl.constexpr,
        COMPUTE_DTYPE: tl.constexpr,
    ):
        row = tl.program_id(0).to(tl.int64)
        batch = row // num_out_frames
        group = row % num_out_frames
        cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)  # (BLOCK_D,)
        col_in_range = cols < channels
        frames, real, coefficients, inverse_total = _group_coefficients(
            lengths_ptr,
            weights_ptr,
            batch,
            group,
            num_frames,
            factor,
            lengths_stride,
            weights_stride,
            BLOCK_F,
            COMPUTE_DTYPE,
        )
        grad_out_offsets = (
            batch * grad_out_batch_stride + group * grad_out_frame_stride + cols * grad_out_channel_stride
        )
        grad_out = tl.load(grad_out_ptr + grad_out_offsets, mask=col_in_range, other=0.0).to(COMPUTE_DTYPE)
        x_offsets = (
            batch * x_batch_stride + frames[:, None] * x_frame_stride + cols[None, :] * x_channel_stride
        )
        x = tl.load(x_ptr + x_offsets, mask=real[:, None] & col_in_range[None, :], other=0.0).to(
            COMPUTE_DTYPE
        )
        # Every frame t < T belongs to exactly one group, so this writes all of grad_x (0 on padding).
        grad_x = coefficients[:, None] * grad_out[None, :]  # (BLOCK_F, BLOCK_D)
        grad_x_offsets = (batch * num_frames + frames[:, None]) * channels + cols[None, :]  # fresh (B, T, D)
        frame_in_range = (frames < (group + 1) * factor) & (frames < num_frames)  # (BLOCK_F,)
        grad_x_mask = frame_in_range[:, None] & col_in_range[None, :]
        tl.store(grad_x_ptr + grad_x_offsets, grad_x.to(grad_x_ptr.dtype.element_ty), mask=grad_x_mask)
        # d out / d p_f = m_f (x_f - out) / S; out recomputed from the x already loaded.
        out = tl.sum(coefficients[:, None] * x, axis=0)  # (BLOCK_D,)
        projected = tl.sum((x - out[None, :]) * grad_out[None, :], axis=1)  # (BLOCK_F,)
        grad_probs = tl.where(real, projected * inverse_total, 0.0)
        partial_offsets = (row * tl.num_programs(1) + tl.program_id(1)) * BLOCK_F + tl.arange(0, BLOCK_F)
        tl.store(grad_probs_partial_ptr + partial_offsets, grad_probs)

    def launch_config(factor: int, channels: int) -> tuple[int, int]:
        """(BLOCK_F, BLOCK_D)."""
        block_f = next_power_of_2(factor)
        block_d = min(next_power_of_2(channels), max(1, _TILE_ELEMENTS // block_f))
        return block_f, block_d


def _launch(x: Tensor, weights: Tensor) -> tuple[int, tuple[int, int], dict]:
    """(K = ceil(T / F), grid, meta-parameters) of a kernel launch on ``x`` (B, T, D) with F = len(weights): one
    program per (output frame of an example, block of D channels)."""
    batch, frames, channels = x.shape
    out_frames = -(-frames // weights.shape[0])
    block_f, block_d = launch_config(weights.shape[0], channels)
    grid = (batch * out_frames, cdiv(channels, block_d))
    meta = {
        "BLOCK_F": block_f,
        "BLOCK_D": block_d,
        "COMPUTE_DTYPE": compute_dtype(x.dtype, weights.dtype),
        "num_warps": _NUM_WARPS,
    }
    return out_frames, grid, meta


def _pairwise_downsample_forward(x: Tensor, lengths: Tensor, weights: Tensor) -> Tensor:
    """The downsampling through the Triton kernel: a new contiguous (B, ceil(T / F), D); no dispatch, no
    checks."""
    batch, frames, channels = x.shape
    factor = weights.shape[0]
    out = x.new_empty((batch, -(-frames // factor), channels))
    if out.numel() == 0:
        return out
    out_frames, grid, meta = _launch(x, weights)
    _pairwise_downsample_forward_kernel[grid](
        x,
        lengths,
        weights,
        out,
        out_frames,
        frames,
        channels,
        factor,
        *x.stride(),
        lengths.stride(0),
        weights.stride(0),
        **meta,
    )
    return out


def _pairwise_downsample_backward(
    grad_out: Tensor, x: Tensor, lengths: Tensor, weights: Tensor
) -> tuple[Tensor, Tensor]:
    """Launches the backward kernel; returns (grad_x like x, contiguous; grad_weights like weights)."""
    _, frames, channels = x.shape
    factor = weights.shape[0]
    grad_x = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if grad_out.numel() == 0:
        return grad_x.zero_(), torch.zeros_like(weights)
    out_frames, grid, meta = _launch(x, weights)
    partials_dtype = torch.float64 if torch.float64 in (x.dtype, weights.dtype) else torch.float32
    # (B K, D blocks, BLOCK_F): each program's share of dL/dp, summed below in a fixed order.
    grad_probs_partial = torch.empty((*grid, meta["BLOCK_F"]), dtype=partials_dtype, device=x.device)
    _pairwise_downsample_backward_kernel[grid](
        grad_out,
        x,
        lengths,
        weights,
        grad_x,
        grad_probs_partial,
        out_frames,
        frames,
        channels,
        factor,
        *grad_out.stride(),
        *x.stride(),
        lengths.stride(0),
        weights.stride(0),
        **meta,
    )
    grad_probs = grad_probs_partial.sum(dim=(0, 1))[:factor]  # (F,)
    probs = weights.to(partials_dtype).softmax(dim=0)
    # softmax Jacobian: dL/dw_h = p_h (dL/dp_h - sum_f p_f dL/dp_f)
    grad_weights = probs * (grad_probs - (probs * grad_probs).sum())
    return grad_x, grad_weights.to(weights.dtype)


def _downsampled_like(x: Tensor, lengths: Tensor, weights: Tensor) -> Tensor:
    batch, frames, channels = x.shape
    return x.new_empty((batch, -(-frames // weights.shape[0]), channels))


def _grads_like(grad_out: Tensor, x: Tensor, lengths: Tensor, weights: Tensor) -> tuple[Tensor, Tensor]:
    return (
        torch.empty_like(x, memory_format=torch.contiguous_format),
        torch.empty_like(weights, memory_format=torch.contiguous_format),
    )


def _pairwise_downsample_setup_context(ctx, inputs: tuple[Tensor, Tensor, Tensor], output: Tensor) -> None:
    ctx.save_for_backward(*inputs)


def _pairwise_downsample_kernel_backward(ctx, grad_out: Tensor) -> tuple[Tensor, None, Tensor]:
    x, lengths, weights = ctx.saved_tensors
    grad_x, grad_weights = _pairwise_downsample_backward_op(grad_out, x, lengths, weights)
    return grad_x, None, grad_weights


# The kernel path (``_kernel_op``): a custom op for torch.compile, differentiable through the backward, which
# saves the inputs only; eager calls skip the custom op's dispatch.
_pairwise_downsample_backward_op = KernelOp(
    "pairwise_downsample_backward", _pairwise_downsample_backward, _grads_like
)
pairwise_downsample_kernel = KernelOp(
    "pairwise_downsample",
    _pairwise_downsample_forward,
    _downsampled_like,
    _pairwise_downsample_setup_context,
    _pairwise_downsample_kernel_backward,
)


def pairwise_downsample(x: Tensor, lengths: Tensor, weights: Tensor) -> Tensor:
    """(B, T, D) -> (B, ceil(T / F), D): each output frame the softmax(``weights``)-weighted average of its group
    of F = ``weights.numel()`` frames, over the group's real frames (t < ``lengths[b]``); 0 for a group with none.

    Runs the kernel when ``use_triton`` says so, x and weights are floating point, lengths int32 / int64 and all
    three on one device; otherwise ``pairwise_downsample_reference``. The new lengths are ``ceil(lengths / F)``.
    """
    _check_inputs(x, lengths, weights)
    supported = (
        x.dtype in _KERNEL_DTYPES
        and weights.dtype in _KERNEL_DTYPES
        and lengths.dtype in _LENGTH_DTYPES
        and lengths.device == weights.device == x.device
    )
    if use_triton("pairwise_downsample", x, supported):
        return pairwise_downsample_kernel(x, lengths, weights)
    return pairwise_downsample_reference(x, lengths, weights)


class PairwiseDownsample(nn.Module):
    """Padding-aware replacement for ``SimpleDownsample(factor)``: same parameter, same call, same output shape.

    The logits are named ``bias`` as in SimpleDownsample and icefall, so their checkpoints load unchanged; they
    start at 0, a plain average.
    """

    def __init__(self, factor: int) -> None:
        super().__init__()
        if factor < 1:
            raise ValueError(f"PairwiseDownsample needs factor >= 1, got {factor}")
        self.factor = factor
        self.bias = nn.Parameter(torch.zeros(factor))  # (F,) softmax logits

    def forward(self, x: Tensor, lengths: Tensor) -> Tensor:
        """x: (B, T, D); lengths: (B,) real frames. Returns (B, ceil(T / factor), D)."""
        return pairwise_downsample(x, lengths, self.bias)

    def extra_repr(self) -> str:
        return f"factor={self.factor}"


def bench_case(batch: int, seq_len: int, channels: int, heads: int, dtype: torch.dtype, device) -> BenchCase:
    """Zipformer's downsampling by 2 at the bench sizes: (B, T, D) -> (B, T/2, D), lengths over (T/2, T]."""
    x = torch.randn(batch, seq_len, channels, dtype=dtype, device=device, requires_grad=True)
    lengths = torch.linspace(seq_len // 2 + 1, seq_len, batch, device=device).round().to(torch.int64)  # (B,)
    weights = torch.zeros(2, device=device, requires_grad=True)  # fp32 logits, as a module keeps them
    out_bytes = batch * -(-seq_len // 2) * channels * x.element_size()
    small = tensor_bytes(lengths, weights)
    # forward: read x, write out; backward: read grad_out and x again, write grad_x
    return BenchCase(
        "pairwise_downsample",
        pairwise_downsample_reference,
        pairwise_downsample_kernel,
        (x, lengths, weights),
        tensor_bytes(x) + out_bytes + small,
        3 * tensor_bytes(x) + 2 * out_bytes + 2 * small,
    )
