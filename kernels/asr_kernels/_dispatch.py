"""The one rule every op in ``asr_kernels`` uses to choose its Triton kernel or its PyTorch reference.

The choice (``set_kernels`` / ``use_kernels``; ``train.run.kernels`` and ``--kernels`` in the trainer):

* ``auto`` (default): the Triton kernel on a CUDA device, the reference elsewhere (also on the CPU under
  ``TRITON_INTERPRET=1``: the interpreter is for parity tests, ~1000x slower than the reference).
* ``reference``: always the plain-PyTorch ``<op>_reference`` (what ``torch.compile`` then fuses itself).
* ``triton``: always the kernel, compiled on CUDA, interpreted on the CPU under ``TRITON_INTERPRET=1``; a
  tensor Triton cannot run raises, naming the op, the device and the fix.

Triton reads ``TRITON_INTERPRET`` when a kernel is decorated, i.e. when ``asr_kernels`` is imported, so set it
before that import: a process that turns it on later has compiled kernels that cannot take CPU tensors.

Every public op calls ``use_triton(op_name, tensor)`` once per call, which also counts the call
(``count_calls``): the routing tests prove with it that a model's forward and backward reach every op.
Kernel paths go through ``torch.library`` custom ops (``asr_kernels::<name>``) with fake implementations,
so ``torch.compile`` traces a model that uses them without a graph break.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from torch import Tensor

try:
    import triton  # noqa: F401

    HAS_TRITON = True
except ImportError:  # CPU-only installs may leave Triton out; every op then runs its reference
    HAS_TRITON = False

KERNEL_CHOICES = ("auto", "reference", "triton")

# The spellings Triton 3.6 itself accepts for a true boolean environment variable.
_TRUE_VALUES = frozenset({"1", "true", "on", "yes"})

_choice = "auto"
_call_counters: list[Counter[str]] = []


def interpreter_enabled() -> bool:
    """Whether ``TRITON_INTERPRET`` asks Triton to run kernels on the CPU interpreter."""
    return os.environ.get("TRITON_INTERPRET", "").strip().lower() in _TRUE_VALUES


def built_for_interpreter(module: ModuleType) -> bool:
    """Whether op module ``module``'s Triton kernels were built for the CPU interpreter. Triton reads
    ``TRITON_INTERPRET`` when a kernel is decorated, i.e. when the module is imported: one imported before it
    was set holds kernels compiled for a GPU, which cannot run on CPU tensors. False without Triton."""
    if not HAS_TRITON:
        return False
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    kernels = [
        value for value in vars(module).values() if isinstance(value, (JITFunction, InterpretedFunction))
    ]
    return bool(kernels) and all(isinstance(kernel, InterpretedFunction) for kernel in kernels)


def triton_available(tensor: Tensor) -> bool:
    """True when Triton can run a kernel on ``tensor``: CUDA, or the CPU under the interpreter."""
    if not HAS_TRITON:
        return False
    return tensor.is_cuda or (tensor.device.type == "cpu" and interpreter_enabled())


def check_kernel_choice(choice: str) -> str:
    if choice not in KERNEL_CHOICES:
        raise ValueError(f"kernels must be one of {', '.join(KERNEL_CHOICES)}, got {choice!r}")
    return choice


def set_kernels(choice: str) -> None:
    """Sets the process-wide choice (``auto``, ``reference`` or ``triton``)."""
    global _choice
    _choice = check_kernel_choice(choice)


def kernels_choice() -> str:
    return _choice


@contextmanager
def use_kernels(choice: str) -> Iterator[None]:
    """The choice for the duration of a ``with`` block; the previous one is restored after."""
    previous = _choice
    set_kernels(choice)
    try:
        yield
    finally:
        set_kernels(previous)


@contextmanager
def count_calls() -> Iterator[Counter[str]]:
    """Counts the public op calls (by op name) made inside the block, kernel or reference path alike."""
    counter: Counter[str] = Counter()
    _call_counters.append(counter)
    try:
        yield counter
    finally:
        _call_counters.remove(counter)


def use_triton(op: str, tensor: Tensor, kernel_supports: bool = True) -> bool:
    """Whether op ``op`` runs its Triton kernel on ``tensor`` under the current choice; counts the call.

    ``kernel_supports`` is False when the op's kernel does not cover this call (a dtype or layout it leaves to
    the reference); ``auto`` then takes the reference and ``triton`` raises, naming what is unsupported.
    """
    for counter in _call_counters:
        counter[op] += 1
    if _choice == "reference":
        return False
    if _choice == "auto":
        return kernel_supports and HAS_TRITON and tensor.is_cuda
    if not triton_available(tensor):
        reason = "Triton is not installed" if not HAS_TRITON else f"the tensor is on {tensor.device}"
        raise RuntimeError(
            f"kernels='triton' but {op} cannot run its Triton kernel: {reason}. Run on a CUDA device, set "
            "TRITON_INTERPRET=1 before asr_kernels is imported (the CPU interpreter, slow), or choose "
            "kernels='auto' or 'reference'"
        )
    if not kernel_supports:
        raise RuntimeError(
            f"kernels='triton' but {op}'s kernel does not cover this call (dtype {tensor.dtype}, shape "
            f"{tuple(tensor.shape)}); choose kernels='auto' to fall back to the reference for it"
        )
    return True
