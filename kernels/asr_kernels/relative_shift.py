"""The Transformer-XL relative shift (Dai et al., 2019, §3.3 and appendix B) without the padded copy.

Relative-position attention scores each query frame i against every relative position, giving (..., T, 2T-1);
attention needs them per key frame j, (..., T, T). With the positions laid out so that row i finds the pair
(i, j) at column T-1-i+j, the shift is

    out[..., i, j] = scores[..., i, T-1-i+j]

The reference (``src/asr_pipeline/modules/attention.py``'s trick) pads a zero column, reinterprets the
(T, 2T) buffer as (2T, T) and drops a row: no gather, but it writes a padded (..., T, 2T) copy and returns a
view of it, so the output holds twice the memory it needs. The kernel reads each row's T contiguous columns
straight from the scores and writes a (..., T, T) tensor: half the forward memory, one read and one write
per output element. Backward writes the whole (..., T, 2T-1) gradient in one pass: the T columns row i read
get ``grad_out``, the T-1 it never read get 0 (no zero-fill followed by a scatter).

Both position layouts in the models are this one index map. Squeezeformer / W2V-BERT lay the sinusoids out
by distance i - j from T-1 down to -(T-1) (column c holds i - j = T-1-c); Zipformer lays them out by offset
j - i from -(T-1) up to T-1 (column c holds j - i = c-(T-1), read through a strided view in
``RelPositionAttentionWeights``). Either way column T-1-i+j holds the pair (i, j), so one op serves both;
the tests check it against both models' code.

Dimension legend: N leading dims (batch, heads) flattened, T frames, P = 2T - 1 relative positions.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from asr_kernels._bench import BenchCase, tensor_bytes
from asr_kernels._dispatch import HAS_TRITON, use_triton
from asr_kernels._kernel_op import KernelOp

# A shift is a copy, exact in any dtype; these are the ones autograd needs and the models use.
_KERNEL_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

# Tile: up to _MAX_BLOCK_COLS columns by enough rows to fill _TILE_ELEMENTS, the usual size for a memory-bound
# Triton copy over 4 warps (16 values per thread). Not yet tuned on a GPU; the tests shrink both to force
# ragged tiles.
_MAX_BLOCK_COLS = 1024
_TILE_ELEMENTS = 2048
_NUM_WARPS = 4


def _check_positions(scores: Tensor) -> int:
    """Returns T; raises unless ``scores`` is (..., T, 2T-1)."""
    if scores.ndim < 2:
        raise ValueError(
            f"relative_shift needs (..., T, 2T-1) scores, got a tensor of shape {tuple(scores.shape)}"
        )
    length, positions = scores.shape[-2:]
    if positions != max(2 * length - 1, 0):
        raise ValueError(
            f"relative_shift expects 2T-1 = {2 * length - 1} relative positions for T = {length} frames, got "
            f"scores of shape {tuple(scores.shape)}; the position embedding must cover offsets -(T-1)..T-1"
        )
    return length


def relative_shift_reference(scores: Tensor) -> Tensor:
    """(..., T, 2T-1) -> (..., T, T), ``out[..., i, j] = scores[..., i, T-1-i+j]``, by pad and reshape.

    A zero column on the left makes each row 2T long; read as 2T rows of T and drop the first, and each row has
    moved one further left than the one before it: exactly the per-row offset -i. Returns a view of the
    padded (..., T, 2T) copy.
    """
    length = _check_positions(scores)
    *batch, _, positions = scores.shape
    padded = F.pad(scores, (1, 0))  # (..., T, 2T)
    padded = padded.reshape(*batch, 2 * length, length)[..., 1:, :]  # (..., 2T-1, T)
    return padded.reshape(*batch, length, positions)[..., :length]  # (..., T, T)


if HAS_TRITON:
    import triton
    import triton.language as tl

    from asr_kernels._tiles import row_tiles

    @triton.jit
    def _relative_shift_forward_kernel(
        scores_ptr,
        out_ptr,
        num_rows,
        length,
        scores_batch_stride,
        scores_row_stride,
        scores_col_stride,
        BLOCK_ROWS: tl.constexpr,
        BLOCK_COLS: tl.constexpr,
    ):
        rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)  # (BLOCK_ROWS,) in N * T
        cols = tl.program_id(1) * BLOCK_COLS + tl.arange(0, BLOCK_COLS)  # (BLOCK_COLS,) key frame j
        mask = (rows < num_rows)[:, None] & (cols < length)[None, :]  # (BLOCK_ROWS, BLOCK_COLS)
        # int64: N * T * P passes 2**31 elements at e.g. 8 x 8 heads x 4096 frames x 8191 positions.
        rows = rows.to(tl.int64)
        batch = rows // length
        query = rows % length  # i
        first_col = (length - 1 - query)[:, None]  # row i reads columns T-1-i .. 2T-2-i
        scores_offsets = (
            batch[:, None] * scores_batch_stride
            + query[:, None] * scores_row_stride
            + (first_col + cols[None, :]) * scores_col_stride
        )
        values = tl.load(scores_ptr + scores_offsets, mask=mask)
        out_offsets = rows[:, None] * length + cols[None, :]  # out is freshly allocated, contiguous (N*T, T)
        tl.store(out_ptr + out_offsets, values, mask=mask)

    @triton.jit
    def _relative_shift_backward_kernel(
        grad_out_ptr,
        grad_scores_ptr,
        num_rows,
        length,
        grad_out_batch_stride,
        grad_out_row_stride,
        grad_out_col_stride,
        BLOCK_ROWS: tl.constexpr,
        BLOCK_COLS: tl.constexpr,
    ):
        positions = 2 * length - 1
        rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)  # (BLOCK_ROWS,) in N * T
        cols = tl.program_id(1) * BLOCK_COLS + tl.arange(0, BLOCK_COLS)  # (BLOCK_COLS,) position column c
        mask = (rows < num_rows)[:, None] & (cols < positions)[None, :]  # (BLOCK_ROWS, BLOCK_COLS)
        rows = rows.to(tl.int64)
        batch = rows // length
        query = rows % length
        key = cols[None, :] - (length - 1 - query)[:, None]  # the j that read column c, if any
        was_read = (key >= 0) & (key < length)
        grad_out_offsets = (
            batch[:, None] * grad_out_batch_stride
            + query[:, None] * grad_out_row_stride
            + key * grad_out_col_stride
        )
        grad = tl.load(grad_out_ptr + grad_out_offsets, mask=mask & was_read, other=0.0)
        grad_offsets = rows[:, None] * positions + cols[None, :]  # grad_scores is fresh, contiguous (N*T, P)
        tl.store(grad_scores_ptr + grad_offsets, grad, mask=mask)

    def launch_config(num_rows: int, num_cols: int) -> tuple[int, int, tuple[int, int]]:
        """(BLOCK_ROWS, BLOCK_COLS, grid) with this op's tile constants (``_tiles.row_tiles``)."""
        return row_tiles(num_rows, num_cols, _MAX_BLOCK_COLS, _TILE_ELEMENTS)


def _relative_shift_forward(scores: Tensor) -> Tensor:
    """The relative shift of (..., T, 2T-1) ``scores`` through the Triton kernel: a new contiguous (..., T, T);
    no dispatch, no checks."""
    length = scores.shape[-2]
    out = scores.new_empty((*scores.shape[:-1], length))
    if out.numel() == 0:
        return out
    scores_3d = scores.reshape(
        -1, length, 2 * length - 1
    )  # (N, T, P); a view whenever the leading dims allow
    num_rows = scores_3d.shape[0] * length
    block_rows, block_cols, grid = launch_config(num_rows, length)
    _relative_shift_forward_kernel[grid](
        scores_3d,
        out,
        num_rows,
        length,
        *scores_3d.stride(),
        BLOCK_ROWS=block_rows,
        BLOCK_COLS=block_cols,
        num_warps=_NUM_WARPS,
    )
    return out


def _relative_shift_backward(grad_out: Tensor) -> Tensor:
    """Launches the backward kernel on (..., T, T) ``grad_out``; returns a new contiguous (..., T, 2T-1)."""
    length = grad_out.shape[-1]
    positions = max(2 * length - 1, 0)
    grad_scores = grad_out.new_empty((*grad_out.shape[:-1], positions))  # new_empty is always contiguous
    if grad_scores.numel() == 0:
        return grad_scores
    # (N, T, T); strides are passed through, so the stride-0 grad that .sum().backward() produces needs no copy.
    grad_out_3d = grad_out.reshape(-1, length, length)
    num_rows = grad_out_3d.shape[0] * length
    block_rows, block_cols, grid = launch_config(num_rows, positions)
    _relative_shift_backward_kernel[grid](
        grad_out_3d,
        grad_scores,
        num_rows,
        length,
        *grad_out_3d.stride(),
        BLOCK_ROWS=block_rows,
        BLOCK_COLS=block_cols,
        num_warps=_NUM_WARPS,
    )
    return grad_scores


def _relative_shift_setup_context(ctx, inputs: tuple[Tensor], output: Tensor) -> None:
    pass  # nothing to save: the backward is the inverse index map, fixed by grad_out's shape


def _relative_shift_kernel_backward(ctx, grad_out: Tensor) -> Tensor:
    return _relative_shift_backward_op(grad_out)


# The kernel path (``_kernel_op``): a custom op for torch.compile, differentiable through the backward, which
# saves nothing (the gradient only needs T, which grad_out carries); eager calls skip the custom op's dispatch.
_relative_shift_backward_op = KernelOp(
    "relative_shift_backward",
    _relative_shift_backward,
    lambda grad_out: grad_out.new_empty((*grad_out.shape[:-1], max(2 * grad_out.shape[-1] - 1, 0))),
)
relative_shift_kernel = KernelOp(
    "relative_shift",
    _relative_shift_forward,
    lambda scores: scores.new_empty((*scores.shape[:-1], scores.shape[-2])),
    _relative_shift_setup_context,
    _relative_shift_kernel_backward,
)


def relative_shift(scores: Tensor) -> Tensor:
    """(..., T, 2T-1) relative-position scores -> (..., T, T) per key, ``out[..., i, j] = scores[..., i, T-1-i+j]``.

    Serves both position layouts (module docstring): Squeezeformer's and W2V-BERT's distances i - j from T-1
    down, and Zipformer's offsets j - i from -(T-1) up. Runs the kernel when ``use_triton`` says so
    (``_dispatch``) and ``scores`` is floating point; otherwise ``relative_shift_reference``. Raises ValueError
    unless the last dim is 2T-1.
    """
    _check_positions(scores)
    if use_triton("relative_shift", scores, scores.dtype in _KERNEL_DTYPES):
        return relative_shift_kernel(scores)
    return relative_shift_reference(scores)


class RelativeShift(nn.Module):
    """``relative_shift`` as a module, for models that list their ops as layers."""

    def forward(self, scores: Tensor) -> Tensor:
        return relative_shift(scores)


def bench_case(batch: int, seq_len: int, channels: int, heads: int, dtype: torch.dtype, device) -> BenchCase:
    """The position scores of every attention layer at the bench sizes: (B, H, T, 2T-1) -> (B, H, T, T)."""
    scores = torch.randn(
        batch, heads, seq_len, 2 * seq_len - 1, dtype=dtype, device=device, requires_grad=True
    )
    out_bytes = batch * heads * seq_len * seq_len * scores.element_size()
    # forward: read the T of 2T-1 columns each row uses, write out; backward: read grad_out, write grad_scores
    return BenchCase(
        "relative_shift",
        relative_shift_reference,
        relative_shift_kernel,
        (scores,),
        2 * out_bytes,
        2 * out_bytes + out_bytes + tensor_bytes(scores),
    )
