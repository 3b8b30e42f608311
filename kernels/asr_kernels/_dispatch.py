"""The one rule every op in ``asr_kernels`` uses to choose its Triton kernel or its PyTorch reference.

An op runs its kernel when Triton can be imported and the tensor is somewhere Triton can run:

* on a CUDA device (compiled kernels), or
* on the CPU with ``TRITON_INTERPRET=1`` (Triton's interpreter; how parity tests run on CPU-only machines).

Anywhere else (no Triton, a CPU tensor without the interpreter, MPS, meta) the op calls its ``<op>_reference``.

Triton reads ``TRITON_INTERPRET`` when a kernel is decorated, i.e. when ``asr_kernels`` is imported, so set it
before that import: a process that turns it on later has compiled kernels that cannot take CPU tensors.
"""

from __future__ import annotations

import os

from torch import Tensor

try:
    import triton  # noqa: F401

    HAS_TRITON = True
except ImportError:  # CPU-only installs may leave Triton out; every op then runs its reference
    HAS_TRITON = False

# The spellings Triton 3.6 itself accepts for a true boolean environment variable.
_TRUE_VALUES = frozenset({"1", "true", "on", "yes"})


def interpreter_enabled() -> bool:
    """Whether ``TRITON_INTERPRET`` asks Triton to run kernels on the CPU interpreter."""
    return os.environ.get("TRITON_INTERPRET", "").strip().lower() in _TRUE_VALUES


def triton_available(tensor: Tensor) -> bool:
    """True when an op should run its Triton kernel on ``tensor``; False means use the reference."""
    if not HAS_TRITON:
        return False
    return tensor.is_cuda or (tensor.device.type == "cpu" and interpreter_enabled())
