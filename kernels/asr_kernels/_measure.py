"""How ``asr-pipeline kernel-bench`` measures the ops: finds each op module's cases (``_bench.OP_MODULES``,
``bench_case`` / ``bench_cases``), times them as eager reference, ``torch.compile``d reference and Triton kernel,
forward and forward+backward, takes their peak memory, and measures the device's copy bandwidth.

Timing: on CUDA, CUDA events around each call, a 256 MiB buffer zeroed between calls so no call finds its inputs
in L2 (50 MiB on an H100: the bench sizes would fit and read faster than memory allows), medians over the
iterations; on the CPU, ``time.perf_counter`` medians. Forward runs under ``torch.no_grad`` (the traffic
``bytes_forward`` counts: no tensors saved for backward); forward+backward is forward then ``torch.autograd.grad``
with a fixed random upstream gradient. Peak memory is CUDA's ``max_memory_allocated`` during one call, above
what was allocated before it; the CPU allocator keeps no such count, so it is not measured there.

No op module imports this file (unlike ``_bench``), so it is no code dependency of the training stages.
"""

from __future__ import annotations

import functools
import importlib
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType

import torch
from torch import Tensor

from asr_kernels import _bench
from asr_kernels._bench import BenchCase

VARIANTS = ("eager", "compile", "triton")  # reference eager, torch.compile(reference), the Triton kernel
# Bytes zeroed between timed CUDA calls: several times any current GPU's L2 (H100 50 MiB, H200 60 MiB).
_L2_FLUSH_BYTES = 256 * 2**20
# Copy-bandwidth probe: far beyond the caches (CUDA L2; on the CPU, last-level caches are tens of MiB).
COPY_BYTES = {"cuda": 2**30, "cpu": 64 * 2**20}


# --- finding the cases ---------------------------------------------------------------------------------------
def load_op_modules(names: Sequence[str] | None = None) -> tuple[dict[str, ModuleType], list[str]]:
    """``asr_kernels.<name>`` for each name (default ``_bench.OP_MODULES``), and the names whose module does
    not exist (yet).

    Only a module that is not there is reported missing: an import error inside an existing module (a typo,
    a missing dependency) propagates, so a broken op is never mistaken for an unwritten one.
    """
    loaded, missing = {}, []
    for name in _bench.OP_MODULES if names is None else names:
        qualified = f"asr_kernels.{name}"
        try:
            loaded[name] = importlib.import_module(qualified)
        except ModuleNotFoundError as error:
            if error.name != qualified:
                raise
            missing.append(name)
    return loaded, missing


def module_bench_cases(
    module: ModuleType, batch: int, seq_len: int, channels: int, heads: int, dtype: torch.dtype, device
) -> list[BenchCase]:
    """The module's ``bench_cases(...)`` list, else its one ``bench_case(...)``."""
    sizes = (batch, seq_len, channels, heads, dtype, device)
    if hasattr(module, "bench_cases"):
        return list(module.bench_cases(*sizes))
    if hasattr(module, "bench_case"):
        return [module.bench_case(*sizes)]
    raise NotImplementedError(
        f"{module.__file__} has neither bench_case(batch, seq_len, channels, heads, dtype, device) nor "
        "bench_cases(...); every op module ships one (see asr_kernels/_bench.py, glu.py for an example)"
    )


@dataclass(frozen=True)
class NamedCase:
    name: str  # the row label: the case's op, made unique when two cases share one
    module: str
    case: BenchCase


def collect_bench_cases(
    modules: dict[str, ModuleType],
    batch: int,
    seq_len: int,
    channels: int,
    heads: int,
    dtype: torch.dtype,
    device,
) -> list[NamedCase]:
    """Every case of ``modules`` at these sizes, in module order."""
    named: list[NamedCase] = []
    seen: set[str] = set()
    for module_name, module in modules.items():
        for case in module_bench_cases(module, batch, seq_len, channels, heads, dtype, device):
            name, index = case.op, 2
            while name in seen:
                name, index = f"{case.op}#{index}", index + 1
            seen.add(name)
            named.append(NamedCase(name, module_name, case))
    return named


def select_cases(
    cases: list[NamedCase], wanted: Sequence[str], missing: Sequence[str] = ()
) -> list[NamedCase]:
    """The cases whose module or op is named in ``wanted``; a ValueError for a name that is neither (names of
    ``missing`` modules are accepted: they just select nothing)."""
    known = {c.module for c in cases} | {c.name for c in cases} | {c.case.op for c in cases}
    unknown = [name for name in wanted if name not in known and name not in missing]
    if unknown:
        modules = list(dict.fromkeys(c.module for c in cases))
        ops = [c.name for c in cases]
        raise ValueError(
            f"unknown op {', '.join(unknown)}: name an op module ({', '.join(modules)}) or an op "
            f"({', '.join(ops)})"
        )
    return [c for c in cases if c.module in wanted or c.name in wanted or c.case.op in wanted]


# --- measuring ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Timing:
    ms: float  # median per call
    peak_bytes: int | None  # above what was allocated before the call; None: not measured (CPU)


@dataclass(frozen=True)
class PassResult:
    """One op, one pass (``fwd`` or ``fwd+bwd``): the timing of each variant that ran."""

    op: str
    module: str
    pass_name: str
    bytes_moved: int  # the BenchCase's byte count for this pass
    timings: dict[str, Timing] = field(default_factory=dict)

    def gb_per_s(self, variant: str) -> float | None:
        timing = self.timings.get(variant)
        return None if timing is None else self.bytes_moved / (timing.ms * 1e-3) / 1e9

    def speedup(self, variant: str, baseline: str) -> float | None:
        """``baseline``'s time over ``variant``'s (> 1: ``variant`` is faster); None if either did not run."""
        if variant not in self.timings or baseline not in self.timings:
            return None
        return self.timings[baseline].ms / self.timings[variant].ms


def time_ms(fn: Callable[[], object], device: torch.device, warmup: int, iters: int) -> float:
    """Median milliseconds per call of ``fn`` after ``warmup`` untimed calls (compiles, JIT, allocator)."""
    for _ in range(warmup):
        fn()
    if device.type == "cuda":
        flush = torch.empty(_L2_FLUSH_BYTES, dtype=torch.uint8, device=device)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        for start, end in zip(starts, ends, strict=True):
            flush.zero_()
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize(device)
        times = [start.elapsed_time(end) for start, end in zip(starts, ends, strict=True)]
    else:
        times = []
        for _ in range(iters):
            started = time.perf_counter()
            fn()
            times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times)


def peak_bytes(fn: Callable[[], object], device: torch.device) -> int | None:
    """Peak CUDA memory allocated during one call of ``fn``, above what was allocated before it."""
    if device.type != "cuda":
        return None
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    result = fn()
    torch.cuda.synchronize(device)
    peak = torch.cuda.max_memory_allocated(device) - before
    del result
    return peak


def copy_bandwidth_gb_per_s(device: torch.device, warmup: int = 2, iters: int = 10) -> float:
    """Measured device-to-same-device copy rate of a large tensor, reads plus writes: the roof a memory-bound
    kernel is held to."""
    nbytes = COPY_BYTES["cuda" if device.type == "cuda" else "cpu"]
    source = torch.ones(nbytes, dtype=torch.uint8, device=device)  # touched, so no first-touch page faults
    target = torch.empty_like(source)
    ms = time_ms(lambda: target.copy_(source), device, max(warmup, 1), max(iters, 5))
    return 2 * nbytes / (ms * 1e-3) / 1e9


def _tensors(value) -> list[Tensor]:
    if isinstance(value, Tensor):
        return [value]
    if isinstance(value, tuple | list):
        return [t for item in value for t in _tensors(item)]
    return []


def grad_inputs(inputs) -> list[Tensor]:
    """The tensors of a case's ``inputs`` that take a gradient."""
    return [t for t in _tensors(inputs) if t.requires_grad]


def forward_call(function: Callable, inputs: tuple) -> Callable[[], object]:
    """One forward of ``function`` on ``inputs`` under ``torch.no_grad`` (nothing saved for a backward)."""

    def call():
        with torch.no_grad():
            return function(*inputs)

    return call


def forward_backward_call(
    function: Callable, inputs: tuple, grad_outputs: Sequence[Tensor] | None = None
) -> Callable[[], object]:
    """One forward of ``function`` on ``inputs`` and the backward to its inputs' gradients, from
    ``grad_outputs`` (default: ones like each output that takes a gradient)."""
    wanted = grad_inputs(inputs)

    def call():
        outputs = [t for t in _tensors(function(*inputs)) if t.requires_grad]
        if not outputs:
            return ()
        grads = [torch.ones_like(t) for t in outputs] if grad_outputs is None else grad_outputs
        return torch.autograd.grad(outputs, wanted, grads, allow_unused=True)

    return call


def measure_case(
    named: NamedCase, device: torch.device, variants: Sequence[str], warmup: int, iters: int
) -> list[PassResult]:
    """``fwd`` and, when the op has a backward (an input requires grad and the output depends on it),
    ``fwd+bwd``: each of ``variants`` timed and (CUDA) its peak memory taken."""
    case = named.case
    functions = {"eager": case.reference, "triton": case.kernel}
    if "compile" in variants:
        torch._dynamo.reset()  # this case's graphs only: no recompile limit hit, no guards left from others
        functions["compile"] = torch.compile(case.reference, dynamic=False)
    outputs = [t for t in _tensors(case.reference(*case.inputs)) if t.requires_grad]
    has_backward = bool(grad_inputs(case.inputs)) and bool(outputs)
    # One upstream gradient per output, the same for every variant. (B, ...) like each output.
    grad_outputs = [torch.randn_like(t) for t in outputs]
    forward = functools.partial(forward_call, inputs=case.inputs)
    forward_backward = functools.partial(forward_backward_call, inputs=case.inputs, grad_outputs=grad_outputs)

    results = []
    passes = [("fwd", forward, case.bytes_forward)]
    if has_backward:
        passes.append(("fwd+bwd", forward_backward, case.bytes_forward_backward))
    for pass_name, wrap, nbytes in passes:
        timings = {}
        for variant in variants:
            call = wrap(functions[variant])
            ms = time_ms(call, device, warmup, iters)
            timings[variant] = Timing(ms, peak_bytes(call, device))
        results.append(PassResult(named.name, named.module, pass_name, nbytes, timings))
    return results
