"""What ``asr-pipeline kernel-bench`` needs from each op: one ``BenchCase`` per op, built by the op module's
``bench_case(batch, seq_len, channels, heads, dtype, device)`` at the reference trainer's flag sizes.

``bytes_forward`` / ``bytes_forward_backward`` are the traffic an ideal kernel cannot avoid (every input read
once, every output written once; for forward+backward also the saved inputs re-read, the upstream gradient
read and the input gradients written): the bench divides them by the measured time for GB/s and compares
that with the device's measured copy bandwidth.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import Tensor


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
