"""The one rule every op in ``asr_kernels`` uses to choose its Triton kernel or its PyTorch reference.

The choice (``set_kernels`` / ``use_kernels``; ``train.run.kernels`` and ``--kernels`` in the trainer):

* ``auto`` (default): on a CUDA device, the Triton kernel of each op that ``AUTO_KERNELS`` names (inside a
  ``torch.compile`` trace only those it marks as beating the compiled reference), the reference for every
  other op; the reference everywhere else (also on the CPU under ``TRITON_INTERPRET=1``: the interpreter is
  for parity tests, ~1000x slower than the reference).
* ``reference``: always the plain-PyTorch ``<op>_reference`` (what ``torch.compile`` then fuses itself).
* ``triton``: always the kernel, compiled on CUDA, interpreted on the CPU under ``TRITON_INTERPRET=1``; a
  tensor Triton cannot run raises, naming the op, the device and the fix.

Triton reads ``TRITON_INTERPRET`` when a kernel is decorated, i.e. when ``asr_kernels`` is imported, so set it
before that import: a process that turns it on later has compiled kernels that cannot take CPU tensors.

``use_kernels(choice, only=OPS)`` narrows any choice to the ops named (every other op runs its reference):
the benchmarks time one op's kernel inside a whole model step with it.

Every public op calls ``use_triton(op_name, tensor)`` once per call, which also counts the call
(``count_calls``): the routing tests prove with it that a model's forward and backward reach every op.
Kernel paths are ``KernelOp``s (``_kernel_op``): ``torch.library`` custom ops (``asr_kernels::<name>``) with fake
implementations, so ``torch.compile`` traces a model that uses them without a graph break, which eager calls
skip for the launcher itself.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from types import ModuleType

import torch
from torch import Tensor

try:
    import triton  # noqa: F401

    HAS_TRITON = True
except ImportError:  # CPU-only installs may leave Triton out; every op then runs its reference
    HAS_TRITON = False

KERNEL_CHOICES = ("auto", "reference", "triton")

# Every op name ``use_triton`` is called with, one per public op (their modules: _bench.OP_MODULES).
OPS = (
    "glu",
    "swoosh_l",
    "swoosh_r",
    "mask_time",
    "mask_channel_time",
    "residual_add_mask_time",
    "relative_shift",
    "sequence_mask",
    "padding_mask",
    "attention_mask",
    "attention_mask_4d",
    "pairwise_downsample",
)

# The ops whose Triton kernel ``auto`` runs on CUDA: op -> whether also inside a torch.compile trace, where
# inductor fuses the op's reference with its neighbours, so the kernel must beat the compiled reference, not
# eager. Every other op runs its reference under ``auto``. The evidence is kernel-bench on an H100 at the
# size of issue 36's batch (bf16, 16 x 1024 x 2048; docs/results/kernels.md, session 9), fwd+bwd against eager
# and against the compiled reference; the kernels left out lose to eager there (GLU 0.66x, SwooshR 0.72x, the
# time masks 0.33-0.97x, the residual 0.91x) or everywhere (the three length masks, 0.04-0.23x: one tiny
# launch each), and the whole set on made Zipformer-M's bf16 eager step 18 % slower on an H200 (issue 36).
AUTO_KERNELS: dict[str, bool] = {
    "relative_shift": True,  # 4.03x eager, 1.63x compiled, at half the peak memory
    "pairwise_downsample": True,  # 2.08x eager, 1.46x compiled
    "swoosh_l": False,  # 2.34x eager, 0.58x compiled
}

# The spellings Triton 3.6 itself accepts for a true boolean environment variable.
_TRUE_VALUES = frozenset({"1", "true", "on", "yes"})

_choice = "auto"
_only: frozenset[str] | None = None  # use_kernels(only=...): the ops not named run their reference
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
    """Sets the process-wide choice (``auto``, ``reference`` or ``triton``); inside ``use_kernels(only=...)`` the
    narrowing to its ops stays until the block ends."""
    global _choice
    _choice = check_kernel_choice(choice)


def kernels_choice() -> str:
    return _choice


def check_ops(ops: Iterable[str]) -> frozenset[str]:
    if isinstance(ops, str):
        raise TypeError(f"ops must be a collection of op names, got the string {ops!r}")
    named = frozenset(ops)
    unknown = sorted(named - set(OPS))
    if unknown:
        raise ValueError(f"unknown kernel op(s) {', '.join(unknown)}; the ops are {', '.join(OPS)}")
    return named


@contextmanager
def use_kernels(choice: str, only: Iterable[str] | None = None) -> Iterator[None]:
    """The choice for the duration of a ``with`` block, for the ops in ``only`` (None: every op; the others
    run their reference); the previous choice is restored after."""
    global _only
    narrowed = None if only is None else check_ops(only)
    previous, previous_only = _choice, _only
    set_kernels(choice)
    _only = narrowed
    try:
        yield
    finally:
        set_kernels(previous)
        _only = previous_only


@contextmanager
def count_calls() -> Iterator[Counter[str]]:
    """Counts the public op calls (by op name) made inside the block, kernel or reference path alike."""
    counter: Counter[str] = Counter()
    _call_counters.append(counter)
    try:
        yield counter
    finally:
        _call_counters.remove(counter)


def auto_runs_kernel(op: str, compiling: bool) -> bool:
    """Whether ``auto`` runs ``op``'s kernel on a CUDA tensor, in eager or inside a torch.compile trace
    (``AUTO_KERNELS``)."""
    return op in AUTO_KERNELS and (AUTO_KERNELS[op] or not compiling)


def kernel_ops(device: str | torch.device, compiling: bool = False) -> tuple[str, ...]:
    """The ops whose Triton kernel the current choice runs on a ``device`` ("cuda", "cuda:1", "cpu", ...) tensor
    the kernel covers, in eager or inside a torch.compile trace: what a run records of its choice."""
    on_cuda = torch.device(device).type == "cuda"
    return tuple(op for op in OPS if _picks_kernel(op, on_cuda, compiling))


def _picks_kernel(op: str, on_cuda: bool, compiling: bool) -> bool:
    # The choice alone, before what the kernel covers: triton picks every op (use_triton raises where it cannot run).
    if _choice == "reference" or (_only is not None and op not in _only):
        return False
    if _choice == "auto":
        return HAS_TRITON and on_cuda and auto_runs_kernel(op, compiling)
    return True


def use_triton(op: str, tensor: Tensor, kernel_supports: bool = True) -> bool:
    """Whether op ``op`` runs its Triton kernel on ``tensor`` under the current choice; counts the call.

    ``kernel_supports`` is False when the op's kernel does not cover this call (a dtype or layout it leaves to
    the reference); ``auto`` then takes the reference and ``triton`` raises, naming what is unsupported.
    """
    for counter in _call_counters:
        counter[op] += 1
    if not _picks_kernel(op, tensor.is_cuda, torch.compiler.is_compiling()):
        return False
    if _choice == "auto":
        return kernel_supports
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
