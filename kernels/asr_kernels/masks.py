"""Masks from lengths, written in one pass: (B,) int lengths -> (B, T), (B, T, T) or (B, H, T, T).

One convention for the whole code base (``src/asr_pipeline/modules/masks.py``), PyTorch's
``key_padding_mask`` one: a bool mask is True at padding, except ``sequence_mask``, its complement, True on
real frames. The additive mask follows ``scaled_dot_product_attention``'s float ``attn_mask``: 0 where a key
is attended, ``finfo(dtype).min`` where it is padding (finfo.min, not -inf: a zero-length example's fully
padded row then averages instead of giving NaN).

The references build ``arange(T)`` and compare it with ``lengths`` under broadcasting; the (B, T, T) one
returns a broadcast view, the additive one fills a zero tensor. The kernel writes each output element once
from one comparison, with no ``arange``, comparison or zero-filled intermediate: what matters for the
(B, H, T, T) additive mask, B * H * T * T elements where the rest are B * T. No backward: masks carry no
gradient.

Dimension legend: B batch, H heads (1 or ``num_heads``), T frames (``max_length``), R output rows (every dim
but the last flattened).
"""

from __future__ import annotations

import torch
from torch import Tensor

from asr_kernels._bench import BenchCase, tensor_bytes
from asr_kernels._dispatch import HAS_TRITON, use_triton
from asr_kernels._kernel_op import KernelOp

_LENGTH_DTYPES = (torch.int32, torch.int64)
# The kernel stores the fill values from fp32 scalars: finfo(fp16 / bf16 / fp32).min are exact in fp32,
# finfo(fp64).min is not, so fp64 additive masks take the reference.
_ADDITIVE_KERNEL_DTYPES = (torch.float16, torch.bfloat16, torch.float32)

# Tile: up to _MAX_BLOCK_COLS columns by enough rows to fill _TILE_ELEMENTS (16 values per thread over 4 warps,
# the usual size for a memory-bound write). Not yet tuned on a GPU; the tests shrink both to force ragged tiles.
_MAX_BLOCK_COLS = 1024
_TILE_ELEMENTS = 2048
_NUM_WARPS = 4


def _resolve_max_length(op: str, lengths: Tensor, max_length: int | None) -> int:
    """Checks ``lengths`` is (B,) and returns T: ``max_length``, or ``lengths.max()`` (0 for an empty batch)."""
    if lengths.dim() != 1:
        raise ValueError(f"{op}: lengths must be 1-D (B,), got shape {tuple(lengths.shape)}")
    if max_length is None:
        max_length = int(lengths.max()) if lengths.numel() else 0
    if max_length < 0:
        raise ValueError(
            f"{op}: max_length must be >= 0, got {max_length}; pass the padded tensor's T, or lengths >= 0"
        )
    return max_length


def _frames(lengths: Tensor, max_length: int) -> Tensor:
    return torch.arange(max_length, device=lengths.device)  # (T,)


def sequence_mask_reference(lengths: Tensor, max_length: int | None = None) -> Tensor:
    """(B,) lengths -> (B, T) bool, True on real frames (t < lengths[b])."""
    max_length = _resolve_max_length("sequence_mask", lengths, max_length)
    return _frames(lengths, max_length)[None, :] < lengths[:, None]  # (B, T)


def padding_mask_reference(lengths: Tensor, max_length: int | None = None) -> Tensor:
    """(B,) lengths -> (B, T) bool, True at padded frames (t >= lengths[b]); ``modules/masks.py``'s."""
    max_length = _resolve_max_length("padding_mask", lengths, max_length)
    return _frames(lengths, max_length)[None, :] >= lengths[:, None]  # (B, T)


def attention_mask_reference(lengths: Tensor, max_length: int | None = None) -> Tensor:
    """(B,) lengths -> (B, T, T) bool, ``[b, i, j]`` True where key j is padding (any query i)."""
    max_length = _resolve_max_length("attention_mask", lengths, max_length)
    padded = _frames(lengths, max_length)[None, :] >= lengths[:, None]  # (B, T)
    return padded[:, None, :].expand(-1, max_length, -1)  # (B, T, T), a broadcast view


def _check_num_heads(num_heads: int) -> None:
    if num_heads < 1:
        raise ValueError(f"attention_mask_4d: num_heads must be >= 1, got {num_heads}")


def attention_mask_4d_reference(
    lengths: Tensor, max_length: int | None = None, num_heads: int = 1, dtype: torch.dtype = torch.float32
) -> Tensor:
    """(B,) lengths -> (B, H, T, T) additive mask in ``dtype``: 0 at real keys, ``finfo(dtype).min`` at padded."""
    max_length = _resolve_max_length("attention_mask_4d", lengths, max_length)
    _check_num_heads(num_heads)
    padded = _frames(lengths, max_length)[None, :] >= lengths[:, None]  # (B, T)
    row = torch.zeros((lengths.shape[0], 1, 1, max_length), dtype=dtype, device=lengths.device)
    row = row.masked_fill(padded[:, None, None, :], torch.finfo(dtype).min)  # (B, 1, 1, T)
    # A broadcast view: what eager code adds to (B, H, T, T) scores costs no (B, H, T, T) write of its own.
    return row.expand(-1, num_heads, max_length, -1)  # (B, H, T, T)


if HAS_TRITON:
    import triton
    import triton.language as tl

    from asr_kernels._tiles import row_tiles

    @triton.jit
    def _length_mask_kernel(
        lengths_ptr,
        out_ptr,
        num_rows,
        rows_per_example,
        max_length,
        lengths_stride,
        padded_value,
        real_value,
        BLOCK_ROWS: tl.constexpr,
        BLOCK_COLS: tl.constexpr,
    ):
        rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)  # (BLOCK_ROWS,) in R
        cols = tl.program_id(1) * BLOCK_COLS + tl.arange(0, BLOCK_COLS)  # (BLOCK_COLS,) key frame
        row_in_range = rows < num_rows
        mask = row_in_range[:, None] & (cols < max_length)[None, :]  # (BLOCK_ROWS, BLOCK_COLS)
        # int64: R * T passes 2**31 elements for a (B, H, T, T) mask at e.g. 8 x 8 heads x 6000 frames.
        rows = rows.to(tl.int64)
        example = rows // rows_per_example  # b: every row of one example shares its length
        lengths = tl.load(lengths_ptr + example * lengths_stride, mask=row_in_range, other=0)
        padded = cols[None, :] >= lengths[:, None]  # (BLOCK_ROWS, BLOCK_COLS)
        values = tl.where(padded, padded_value, real_value)
        out_offsets = (
            rows[:, None] * max_length + cols[None, :]
        )  # out is freshly allocated, contiguous (R, T)
        tl.store(out_ptr + out_offsets, values.to(out_ptr.dtype.element_ty), mask=mask)

    def launch_config(num_rows: int, num_cols: int) -> tuple[int, int, tuple[int, int]]:
        """(BLOCK_ROWS, BLOCK_COLS, grid) with this op's tile constants (``_tiles.row_tiles``)."""
        return row_tiles(num_rows, num_cols, _MAX_BLOCK_COLS, _TILE_ELEMENTS)


def _fill_from_lengths(
    lengths: Tensor, out: Tensor, rows_per_example: int, padded_value: float | int, real_value: float | int
) -> Tensor:
    """Launches the kernel: row r of ``out`` viewed as (R, T) is example r // rows_per_example's; returns out."""
    if out.numel() == 0:
        return out
    max_length = out.shape[-1]
    # Triton has no bool pointer that torch hands over; a bool tensor is stored as bytes, so write 0 / 1 bytes.
    out_rows = (out.view(torch.uint8) if out.dtype == torch.bool else out).view(-1, max_length)  # (R, T)
    block_rows, block_cols, grid = launch_config(out_rows.shape[0], max_length)
    _length_mask_kernel[grid](
        lengths,
        out_rows,
        out_rows.shape[0],
        rows_per_example,
        max_length,
        lengths.stride(0),
        padded_value,
        real_value,
        BLOCK_ROWS=block_rows,
        BLOCK_COLS=block_cols,
        num_warps=_NUM_WARPS,
    )
    return out


# The masks' outputs, empty: what each launcher fills and what its custom op's fake returns.
def _empty_2d(lengths: Tensor, max_length: int) -> Tensor:
    return torch.empty((lengths.shape[0], max_length), dtype=torch.bool, device=lengths.device)


def _empty_3d(lengths: Tensor, max_length: int) -> Tensor:
    return torch.empty((lengths.shape[0], max_length, max_length), dtype=torch.bool, device=lengths.device)


def _sequence_mask(lengths: Tensor, max_length: int) -> Tensor:
    """(B, T) bool, True on real frames, through the Triton kernel; no dispatch, no checks."""
    out = _empty_2d(lengths, max_length)
    return _fill_from_lengths(lengths, out, 1, padded_value=0, real_value=1)


def _padding_mask(lengths: Tensor, max_length: int) -> Tensor:
    """(B, T) bool, True at padding, through the Triton kernel; no dispatch, no checks."""
    out = _empty_2d(lengths, max_length)
    return _fill_from_lengths(lengths, out, 1, padded_value=1, real_value=0)


def _attention_mask(lengths: Tensor, max_length: int) -> Tensor:
    """(B, T, T) bool, True where the key is padding, through the Triton kernel; no dispatch, no checks."""
    out = _empty_3d(lengths, max_length)
    return _fill_from_lengths(lengths, out, max_length, padded_value=1, real_value=0)


def _empty_4d(lengths: Tensor, max_length: int, num_heads: int, dtype: torch.dtype) -> Tensor:
    return torch.empty(
        (lengths.shape[0], num_heads, max_length, max_length), dtype=dtype, device=lengths.device
    )


def _attention_mask_4d(lengths: Tensor, max_length: int, num_heads: int, dtype: torch.dtype) -> Tensor:
    """(B, H, T, T) additive mask through the Triton kernel; no dispatch, no checks."""
    out = _empty_4d(lengths, max_length, num_heads, dtype)
    padded_value = torch.finfo(dtype).min
    return _fill_from_lengths(lengths, out, num_heads * max_length, padded_value=padded_value, real_value=0.0)


# The kernel paths (``_kernel_op``): custom ops for torch.compile, called directly in eager. No backward: lengths
# are integers and masks carry no gradient.
sequence_mask_kernel = KernelOp("sequence_mask", _sequence_mask, _empty_2d)
padding_mask_kernel = KernelOp("padding_mask", _padding_mask, _empty_2d)
attention_mask_kernel = KernelOp("attention_mask", _attention_mask, _empty_3d)
attention_mask_4d_kernel = KernelOp("attention_mask_4d", _attention_mask_4d, _empty_4d)


def sequence_mask(lengths: Tensor, max_length: int | None = None) -> Tensor:
    """(B,) int lengths -> (B, T) bool, True on real frames; T is ``max_length``, by default ``lengths.max()``.

    Pass the padded tensor's T so the mask lines up with it (and so ``torch.compile`` needs no ``.max()``).
    Runs the kernel when ``use_triton`` says so and the lengths are int32 / int64; otherwise the reference.
    """
    max_length = _resolve_max_length("sequence_mask", lengths, max_length)
    if use_triton("sequence_mask", lengths, lengths.dtype in _LENGTH_DTYPES):
        return sequence_mask_kernel(lengths, max_length)
    return sequence_mask_reference(lengths, max_length)


def padding_mask(lengths: Tensor, max_length: int | None = None) -> Tensor:
    """(B,) int lengths -> (B, T) bool, True at padded frames: a drop-in for ``modules.masks.padding_mask``."""
    max_length = _resolve_max_length("padding_mask", lengths, max_length)
    if use_triton("padding_mask", lengths, lengths.dtype in _LENGTH_DTYPES):
        return padding_mask_kernel(lengths, max_length)
    return padding_mask_reference(lengths, max_length)


def attention_mask(lengths: Tensor, max_length: int | None = None) -> Tensor:
    """(B,) int lengths -> (B, T, T) bool, ``[b, i, j]`` True where key j is padding, for every query i.

    The kernel writes all B * T * T values; the reference returns a broadcast view of a (B, T) mask, which
    costs nothing. Worth the kernel only where a consumer needs the mask materialised; one that broadcasts
    can take ``padding_mask(lengths, T)[:, None, :]`` instead.
    """
    max_length = _resolve_max_length("attention_mask", lengths, max_length)
    if use_triton("attention_mask", lengths, lengths.dtype in _LENGTH_DTYPES):
        return attention_mask_kernel(lengths, max_length)
    return attention_mask_reference(lengths, max_length)


def attention_mask_4d(
    lengths: Tensor, max_length: int | None = None, num_heads: int = 1, dtype: torch.dtype = torch.float32
) -> Tensor:
    """(B,) int lengths -> (B, H, T, T) additive attention mask, H = ``num_heads`` (1 broadcasts over heads).

    0 where the key is a real frame, ``torch.finfo(dtype).min`` where it is padding: the float ``attn_mask`` of
    ``scaled_dot_product_attention``, or a bias to add position scores onto. The kernel covers fp16, bf16
    and fp32; fp64 takes the reference.
    """
    max_length = _resolve_max_length("attention_mask_4d", lengths, max_length)
    _check_num_heads(num_heads)
    supported = lengths.dtype in _LENGTH_DTYPES and dtype in _ADDITIVE_KERNEL_DTYPES
    if use_triton("attention_mask_4d", lengths, supported):
        return attention_mask_4d_kernel(lengths, max_length, num_heads, dtype)
    return attention_mask_4d_reference(lengths, max_length, num_heads, dtype)


def _bench_lengths(batch: int, seq_len: int, device) -> Tensor:
    # Lengths spread over (T/2, T], a padded batch as a bucketing sampler makes it.
    return torch.linspace(seq_len // 2 + 1, seq_len, batch, device=device).round().to(torch.int64)  # (B,)


def bench_cases(
    batch: int, seq_len: int, channels: int, heads: int, dtype: torch.dtype, device
) -> list[BenchCase]:
    """All four mask ops at the bench sizes. No backward: forward+backward traffic equals forward's."""
    lengths = _bench_lengths(batch, seq_len, device)
    bool_bytes = batch * seq_len
    additive_bytes = batch * heads * seq_len * seq_len * dtype.itemsize
    cases = [
        ("sequence_mask", sequence_mask_reference, sequence_mask_kernel, (lengths, seq_len), bool_bytes),
        ("padding_mask", padding_mask_reference, padding_mask_kernel, (lengths, seq_len), bool_bytes),
        (
            "attention_mask",
            attention_mask_reference,
            attention_mask_kernel,
            (lengths, seq_len),
            bool_bytes * seq_len,
        ),
        (
            "attention_mask_4d",
            attention_mask_4d_reference,
            attention_mask_4d_kernel,
            (lengths, seq_len, heads, dtype),
            additive_bytes,
        ),
    ]
    # forward: read lengths, write the mask
    return [
        BenchCase(
            op,
            reference,
            kernel,
            inputs,
            tensor_bytes(lengths) + out_bytes,
            tensor_bytes(lengths) + out_bytes,
        )
        for op, reference, kernel, inputs, out_bytes in cases
    ]


def bench_case(batch: int, seq_len: int, channels: int, heads: int, dtype: torch.dtype, device) -> BenchCase:
    """The (B, H, T, T) additive mask at the bench sizes, the one mask big enough to time; ``bench_cases`` has
    all four."""
    return bench_cases(batch, seq_len, channels, heads, dtype, device)[-1]
