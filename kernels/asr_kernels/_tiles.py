"""Tile shapes and compute types the ops' launchers share (imported only where Triton is installed).

Memory-bound elementwise kernels here read a tile of (slow dim x contiguous dim): the contiguous side gets up to
``max_block`` elements (coalesced loads), the other side fills the tile up to ``tile_elements`` (16 values per
thread over 4 warps for 2048). Each op keeps its own ``_MAX_BLOCK*`` / ``_TILE_ELEMENTS`` constants, read at
launch time, so its tests can shrink them to force ragged tiles.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


def tile_sides(contiguous: int, other: int, max_block: int, tile_elements: int) -> tuple[int, int]:
    """(block along the contiguous dim, block along the other dim), both powers of two."""
    block_contiguous = min(triton.next_power_of_2(contiguous), max_block)
    block_other = max(1, min(tile_elements // block_contiguous, triton.next_power_of_2(other)))
    return block_contiguous, block_other


def row_tiles(
    num_rows: int, num_cols: int, max_block: int, tile_elements: int
) -> tuple[int, int, tuple[int, int]]:
    """(BLOCK_ROWS, BLOCK_COLS, grid) over a (rows, contiguous cols) view: rows on grid axis 0, whose limit
    (2**31 - 1) fits any B * T."""
    block_cols, block_rows = tile_sides(num_cols, num_rows, max_block, tile_elements)
    return block_rows, block_cols, (triton.cdiv(num_rows, block_rows), triton.cdiv(num_cols, block_cols))


def compute_dtype(*dtypes: torch.dtype):
    """fp32 keeps half-precision inputs to a single rounding, at the store; fp64 stays fp64 for gradcheck."""
    return tl.float64 if torch.float64 in dtypes else tl.float32
