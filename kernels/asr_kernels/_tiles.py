"""Tile shapes and compute types the ops' launchers share, and the tile indexing their kernels share (imported
only where Triton is installed).

Memory-bound elementwise kernels here read a tile of (slow dim x contiguous dim): the contiguous side gets up to
``max_block`` elements (coalesced loads), the other side fills the tile up to ``tile_elements`` (16 values per
thread over 4 warps for 2048). Each op keeps its own ``_MAX_BLOCK*`` / ``_TILE_ELEMENTS`` constants, read at
launch time, so its tests can shrink them to force ragged tiles.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


# The launchers' host-side arithmetic in plain Python: Triton's own ``triton.cdiv`` and ``triton.next_power_of_2``
# are constexpr functions, whose wrapper costs several microseconds a call, and a launch makes several
# (benchmarks/bench_kernel_overhead.py).
def cdiv(numerator: int, denominator: int) -> int:
    """``numerator / denominator`` rounded up, for positive ints."""
    return -(-numerator // denominator)


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= ``n`` (0 for 0), as ``triton.next_power_of_2``."""
    return 1 << (n - 1).bit_length() if n > 0 else 0


def tile_sides(contiguous: int, other: int, max_block: int, tile_elements: int) -> tuple[int, int]:
    """(block along the contiguous dim, block along the other dim), both powers of two."""
    block_contiguous = min(next_power_of_2(contiguous), max_block)
    block_other = max(1, min(tile_elements // block_contiguous, next_power_of_2(other)))
    return block_contiguous, block_other


def row_tiles(
    num_rows: int, num_cols: int, max_block: int, tile_elements: int
) -> tuple[int, int, tuple[int, int]]:
    """(BLOCK_ROWS, BLOCK_COLS, grid) over a (rows, contiguous cols) view: rows on grid axis 0, whose limit
    (2**31 - 1) fits any B * T."""
    block_cols, block_rows = tile_sides(num_cols, num_rows, max_block, tile_elements)
    return block_rows, block_cols, (cdiv(num_rows, block_rows), cdiv(num_cols, block_cols))


def row_meta(block_rows: int, block_cols: int, dtype: torch.dtype, num_warps: int) -> dict:
    """The meta-parameters of a kernel tiled by ``row_tile``, for ``kernel[grid](..., **row_meta(...))``: its
    BLOCK_ROWS, BLOCK_C, COMPUTE_DTYPE (``compute_dtype`` of ``dtype``) and num_warps."""
    return {
        "BLOCK_ROWS": block_rows,
        "BLOCK_C": block_cols,
        "COMPUTE_DTYPE": compute_dtype(dtype),
        "num_warps": num_warps,
    }


def compute_dtype(*dtypes: torch.dtype):
    """fp32 keeps half-precision inputs to a single rounding, at the store; fp64 stays fp64 for gradcheck."""
    return tl.float64 if torch.float64 in dtypes else tl.float32


@triton.jit
def row_tile(num_rows, num_cols, BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr):
    """This program's tile of a (rows, cols) launch from ``row_tiles``: (rows (BLOCK_ROWS, 1) int64, cols
    (BLOCK_COLS,), in-bounds mask (BLOCK_ROWS, BLOCK_COLS))."""
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)  # (BLOCK_ROWS,)
    cols = tl.program_id(1) * BLOCK_COLS + tl.arange(0, BLOCK_COLS)  # (BLOCK_COLS,)
    mask = (rows < num_rows)[:, None] & (cols < num_cols)[None, :]  # (BLOCK_ROWS, BLOCK_COLS)
    # int64 row offsets: R * C passes 2**31 elements for long batches (e.g. 64 x 1500 frames x 1536 x 15).
    return rows.to(tl.int64)[:, None], cols, mask


@triton.jit
def time_tile(
    lengths_ptr,
    lengths_stride,
    num_frames,
    channels,
    num_time_blocks,
    BLOCK_T: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    """This program's tile of a (B, T, C) launch whose grid axis 0 runs over (batch, time block) pairs, so that
    neither B nor T meets axis 1's 65535 limit: (batch (int64), frames (BLOCK_T, 1) int64, cols (BLOCK_C,),
    in-bounds mask, mask of the real frames (both (BLOCK_T, BLOCK_C)))."""
    batch = tl.program_id(0) // num_time_blocks
    frames = (tl.program_id(0) % num_time_blocks) * BLOCK_T + tl.arange(0, BLOCK_T)  # (BLOCK_T,)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)  # (BLOCK_C,)
    length = tl.load(lengths_ptr + batch * lengths_stride)
    in_bounds = (frames < num_frames)[:, None] & (cols < channels)[None, :]  # (BLOCK_T, BLOCK_C)
    real = in_bounds & (frames < length)[:, None]
    # int64 offsets: B * T * C passes 2**31 elements for long batches (e.g. 64 x 1500 frames x 32 k).
    return batch.to(tl.int64), frames.to(tl.int64)[:, None], cols, in_bounds, real
