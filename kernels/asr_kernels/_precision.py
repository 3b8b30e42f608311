"""Ops kept in their input's dtype where autocast would widen them.

CUDA's autocast runs some ops in float32 whatever their input (its "fp32" list: softplus, softmax, exp, log,
pow, ...), so under bf16/fp16 autocast a bf16 input comes back float32 and every elementwise op after it runs
and writes float32 until a matrix product casts back. Where the float32 result buys nothing (the next consumer
casts it to bf16 anyway), ``in_input_dtype`` runs the op in the input's dtype: PyTorch's half and bf16
elementwise and softmax kernels compute in float32 inside and round once on the way out. The bytes this saves
in an eager forward: ``benchmarks/bench_forward_bytes.py``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor


def in_input_dtype(op: Callable[[Tensor], Tensor], x: Tensor) -> Tensor:
    """``op(x)`` with autocast off for x's device while it runs: the result has x's dtype (as without autocast)."""
    if not torch.is_autocast_enabled(x.device.type):
        return op(x)
    with torch.autocast(x.device.type, enabled=False):
        return op(x)
