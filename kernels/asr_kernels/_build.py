"""What each Triton kernel of ``asr_kernels`` becomes on a GPU, found without one (``asr-pipeline kernel-bench
--build-for sm90``).

Triton's interpreter, which the CPU parity tests run, accepts code that Triton's compiler rejects, and says
nothing of what a kernel costs a GPU. Here each op's bench case (``_bench``) runs forward, then forward and
backward, on the CPU with the Triton path chosen. Every kernel launch is compiled for the target architecture
instead of run: Triton binds and specializes the arguments as a launch on that GPU would (dtypes, 16-byte
alignment, sizes divisible by 16 or equal to 1), then ``triton.compile`` builds the kernel for the target.
``ptxas``, which ships with Triton, assembles the PTX again with its report on. Per distinct kernel and
meta-parameters:

- registers per thread, and bytes spilled (local memory, as slow as global);
- shared memory;
- the widths of its global loads and stores, in bits. 128 (four 32-bit words a thread) moves a memory-bound
  kernel's bytes in the fewest instructions; a 16-bit scalar access of bf16 takes eight times as many.

Nothing runs: the kernels' outputs are left unwritten, so only the launches' shapes and types mean anything.
The process must import ``asr_kernels`` without ``TRITON_INTERPRET``, so that its kernels are compiled
functions, not interpreted ones. No op module imports this file: it is no code dependency of the training
stages.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

from asr_kernels import _dispatch
from asr_kernels._measure import NamedCase, forward_backward_call, forward_call, grad_inputs

_GLOBAL_ACCESS = re.compile(r"\b(ld|st)\.global((?:\.[\w:]+)+)")
_REGISTERS = re.compile(r"Used (\d+) registers")
_SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


@dataclass(frozen=True)
class KernelBuild:
    """One kernel as one op's launches built it for the target: what it costs per thread, or why it failed."""

    op: str  # the case's name, as kernel-bench names it
    kernel: str  # the @triton.jit function
    meta: dict[str, object]  # its constexpr arguments, by name, and num_warps
    registers: int = 0
    spill_bytes: int = 0  # spill stores plus spill loads
    shared_bytes: int = 0
    load_bits: tuple[int, ...] = ()  # the distinct widths of its global loads
    store_bits: tuple[int, ...] = ()
    seconds: float = 0.0  # compiling and assembling
    error: str | None = None  # the compiler's first line, when it failed


def access_bits(ptx: str) -> dict[str, tuple[int, ...]]:
    """The distinct widths in bits of ``ptx``'s global loads (``ld``) and stores (``st``): a vector access
    ``.v4.b32`` is 128, a scalar ``.b16`` 16."""
    widths: dict[str, set[int]] = {"ld": set(), "st": set()}
    for match in _GLOBAL_ACCESS.finditer(ptx):
        parts = match.group(2).split(".")[1:]
        vector = next((int(part[1:]) for part in parts if re.fullmatch(r"v\d", part)), 1)
        bits = next((int(part[1:]) for part in reversed(parts) if re.fullmatch(r"[bfsu]\d+", part)), None)
        if bits is not None:
            widths[match.group(1)].add(vector * bits)
    return {kind: tuple(sorted(found)) for kind, found in widths.items()}


def ptxas_report(ptx: str, capability: int) -> tuple[int, int]:
    """(registers per thread, bytes spilled) of ``ptx``'s kernel, from ``ptxas -v`` (Triton's own ptxas)."""
    from triton.backends.nvidia.compiler import get_ptxas, sm_arch_from_capability

    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "kernel.ptx"
        source.write_text(ptx)
        command = [get_ptxas(capability).path, f"-arch={sm_arch_from_capability(capability)}", "-v"]
        report = subprocess.run(
            [*command, str(source), "-o", str(Path(folder) / "kernel.cubin")],
            capture_output=True,
            text=True,
            check=True,
        ).stderr
    registers = _REGISTERS.search(report)
    spills = [int(stores) + int(loads) for stores, loads in _SPILLS.findall(report)]
    return (int(registers.group(1)) if registers else 0), sum(spills)


@dataclass
class _Builder:
    """Stands in for ``JITFunction.run``: binds a launch's arguments for the target, builds each distinct
    kernel once."""

    capability: int
    op: str = ""
    builds: dict[tuple, KernelBuild] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from triton.backends.compiler import GPUTarget
        from triton.compiler import make_backend

        self.target = GPUTarget("cuda", self.capability, 32)
        self.backend = make_backend(self.target)

    def run(self, function, *args, grid, warmup, **kwargs) -> None:
        import triton
        from triton.compiler import ASTSource
        from triton.runtime.jit import create_function_from_signature

        kwargs["debug"] = False
        binder = create_function_from_signature(function.signature, function.params, self.backend)
        bound, specialization, options = binder(*args, **kwargs)
        options, signature, constexprs, attrs = function._pack_args(
            self.backend, kwargs, bound, specialization, options
        )
        name = function.fn.__name__
        key = (self.op, name, repr(signature), repr(constexprs), repr(attrs), repr(options))
        if key in self.builds:
            return
        meta = {function.params[path[0]].name: _plain(value) for path, value in constexprs.items()}
        meta["num_warps"] = options.num_warps
        started = time.perf_counter()
        try:
            kernel = triton.compile(
                ASTSource(function, signature, constexprs, attrs),
                target=self.target,
                options=options.__dict__,
            )
        except Exception as error:  # the compiler's many error types: each is reported, none stops the rest
            self.builds[key] = KernelBuild(
                self.op, name, meta, error=f"{type(error).__name__}: {_first_line(str(error))}"
            )
            return
        try:
            registers, spilled = ptxas_report(kernel.asm["ptx"], self.capability)
        except subprocess.CalledProcessError as error:
            self.builds[key] = KernelBuild(
                self.op, name, meta, error=f"ptxas: {_first_line(error.stderr or '')}"
            )
            return
        bits = access_bits(kernel.asm["ptx"])
        self.builds[key] = KernelBuild(
            self.op,
            name,
            meta,
            registers=registers,
            spill_bytes=spilled,
            shared_bytes=kernel.metadata.shared,
            load_bits=bits["ld"],
            store_bits=bits["st"],
            seconds=time.perf_counter() - started,
        )


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0] if lines else ""


def _plain(value: object) -> object:
    """A constexpr's value as JSON takes it: numbers and booleans as they are, Triton dtypes by name."""
    return value if isinstance(value, bool | int | float | str) or value is None else str(value)


@contextlib.contextmanager
def _building(builder: _Builder) -> Iterator[None]:
    """Every Triton launch in the block is built by ``builder`` instead of run, and every op takes its kernel
    path on CPU tensors."""
    from triton.runtime.jit import JITFunction

    def run(function, *args, grid, warmup, **kwargs):
        return builder.run(function, *args, grid=grid, warmup=warmup, **kwargs)

    with (
        mock.patch.object(JITFunction, "run", run),
        mock.patch.object(_dispatch, "triton_available", lambda tensor: True),
        _dispatch.use_kernels("triton"),
    ):
        yield


def check_buildable() -> None:
    """Raises RuntimeError when the kernels were made for Triton's interpreter, which nothing can build."""
    if _dispatch.interpreter_enabled():
        raise RuntimeError(
            "TRITON_INTERPRET is set: asr_kernels' kernels were made for Triton's interpreter, not a GPU; "
            "unset TRITON_INTERPRET and rerun"
        )


def build_cases(cases: Sequence[NamedCase], capability: int) -> list[KernelBuild]:
    """Each distinct kernel launched by ``cases`` (bench cases on the CPU) forward and forward+backward, built
    for an NVIDIA GPU of compute ``capability`` (90: the H100 and H200), in launch order."""
    check_buildable()
    builder = _Builder(capability)
    with _building(builder):
        for named in cases:
            builder.op = named.name
            before = len(builder.builds)
            case = named.case
            forward_call(case.kernel, case.inputs)()
            if grad_inputs(case.inputs):
                forward_backward_call(case.kernel, case.inputs)()
            if len(builder.builds) == before:
                # empty inputs launch nothing; kernels made for the interpreter (TRITON_INTERPRET set at import)
                # run there instead of being built
                builder.builds[(named.name,)] = KernelBuild(
                    named.name,
                    "-",
                    {},
                    error="no Triton launch to build: empty inputs, or interpreted kernels",
                )
    return list(builder.builds.values())
