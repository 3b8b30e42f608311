"""What ``asr-pipeline kernel-bench`` needs from each op: one ``BenchCase`` per op, built by the op module's
``bench_case(batch, seq_len, channels, heads, dtype, device)`` at the reference trainer's flag sizes.

``bytes_forward`` / ``bytes_forward_backward`` are the traffic an ideal kernel cannot avoid (every input read
once, every output written once; for forward+backward also the saved inputs re-read, the upstream gradient
read and the input gradients written): the bench divides them by the measured time for GB/s and compares
that with the device's measured copy bandwidth.

A module with several cases (one per op it holds) exposes ``bench_cases(...)`` returning a list; the bench takes
that over ``bench_case``. ``OP_MODULES`` names every op module. The measuring itself is ``asr_kernels._measure``,
apart from this file because every op module imports this one: the training stages' DVC code deps include it,
and a change to how the bench times things should not rerun training.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import Tensor

# Every op module of asr_kernels, in the order the bench reports them.
OP_MODULES = (
    "glu",
    "swoosh",
    "mask_time",
    "residual_add_mask",
    "relative_shift",
    "masks",
    "pairwise_downsample",
)


@dataclass(frozen=True)
class BenchCase:
    op: str  # the name use_triton counts, e.g. "glu"
    reference: Callable[..., Tensor]  # the plain-PyTorch reference (eager, or compiled by the bench)
    kernel: Callable[..., Tensor]  # the Triton path (the custom op), same arguments
    inputs: tuple  # positional arguments for both; floating tensors with requires_grad get gradients
    bytes_forward: int
    bytes_forward_backward: int


def tensor_bytes(*tensors: Tensor) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)
