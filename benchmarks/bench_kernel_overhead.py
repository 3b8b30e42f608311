"""Issue 36: what each ``asr_kernels`` op's Triton path costs the CPU per call, measured without a GPU.

An eager training step on a GPU goes as fast as the CPU launches its kernels, so an op's CPU time per call
is part of the step's time whatever its kernel costs the GPU. Here every Triton launch is a no-op
(``JITFunction.run`` stubbed, and the interpreter's under ``TRITON_INTERPRET``: what is left is our own Python
around the launch, not Triton's), the ops take
their Triton path on CPU tensors of the kernel-bench's sizes (tiny by default: the time is per call, not per
byte), and per op, forward and forward+backward (``torch.autograd.grad``), it times side by side:

- ``reference``: the plain-PyTorch reference, computing for real (tiny tensors: little work);
- ``custom op``: the kernel path entered through its ``torch.library`` custom ops, forward and backward, as
  every eager call was entered before ``asr_kernels._kernel_op``;
- ``kernel op``: the kernel path as eager calls enter it now (``KernelOp``: an ``autograd.Function`` over the
  same launchers).

Then the op calls of one Zipformer-M forward (``count_calls``, the kernels all on), and what they cost the CPU
per training step on either path. Medians of ``--repeats`` rounds of ``--calls`` calls, the arms interleaved.

``--device cuda`` launches for real, on tiny CUDA tensors (a GPU runs each kernel in a few microseconds, so the
CPU's side sets the pace): each round's wall time, the GPU waited for at its end, per call. That is what a
launch-bound eager step pays per op, Triton's own launch included.

    python benchmarks/bench_kernel_overhead.py
    python benchmarks/bench_kernel_overhead.py --device cuda      # on a GPU machine
    python benchmarks/bench_kernel_overhead.py --ops relative_shift pairwise_downsample --repeats 9
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time
from collections.abc import Callable, Iterator
from unittest import mock

import torch
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

from asr_kernels import _dispatch, count_calls, use_kernels
from asr_kernels._kernel_op import KernelOp
from asr_kernels._measure import (
    collect_bench_cases,
    forward_backward_call,
    forward_call,
    grad_inputs,
    load_op_modules,
    select_cases,
)

ARMS = ("reference", "custom op", "kernel op")


@contextlib.contextmanager
def launches_stubbed() -> Iterator[None]:
    """Every Triton launch a no-op, every op on its Triton path even on CPU tensors."""

    def launch(self, *args, grid, warmup, **kwargs) -> None:
        return None

    with (
        mock.patch.object(JITFunction, "run", launch),
        mock.patch.object(InterpretedFunction, "run", launch),
        mock.patch.object(_dispatch, "triton_available", lambda tensor: True),
        use_kernels("triton"),
    ):
        yield


def kernel_paths(device: str) -> contextlib.AbstractContextManager:
    """Every op on its Triton path: launched for real on CUDA, stubbed elsewhere."""
    return use_kernels("triton") if device == "cuda" else launches_stubbed()


@contextlib.contextmanager
def through_custom_ops() -> Iterator[None]:
    """Every ``KernelOp`` call (forward and backward) entered through its custom op, as before ``KernelOp``."""
    with mock.patch.object(KernelOp, "__call__", lambda self, *args: self.op(*args)):
        yield


def call(case, arm: str, backward: bool) -> Callable[[], object]:
    function = case.reference if arm == "reference" else case.kernel
    return (forward_backward_call if backward else forward_call)(function, case.inputs)


def microseconds(function: Callable[[], object], arm: str, calls: int, device: str) -> float:
    """Wall microseconds per call of ``calls`` calls; on CUDA the GPU is waited for before and after."""
    with through_custom_ops() if arm == "custom op" else contextlib.nullcontext():
        if device == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(calls):
            function()
        if device == "cuda":
            torch.cuda.synchronize()
        return (time.perf_counter() - started) / calls * 1e6


def zipformer_m_calls() -> dict[str, int]:
    """The asr_kernels op calls of one Zipformer-M training forward (each with a backward but the masks')."""
    from asr_pipeline.models.registry import build_model, default_input_dim

    model = build_model("zipformer", "m", input_dim=default_input_dim("zipformer"), vocab_size=500).train()
    features = torch.randn(2, 400, default_input_dim("zipformer"))
    with count_calls() as calls, torch.no_grad():
        model(features, torch.tensor([400, 300]))
    return dict(calls)


def _device_name() -> str:
    return torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", nargs="+", help="op modules or ops (default: all)")
    parser.add_argument(
        "--device", choices=["cpu", "cuda"], default="cpu", help="cuda: real launches on a GPU (see above)"
    )
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq-len", type=int, default=16)
    parser.add_argument("--channels", type=int, default=8)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--calls", type=int, default=200, help="calls per round")
    parser.add_argument(
        "--repeats", type=int, default=5, help="rounds per arm, interleaved; the median is kept"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    launches = {"cpu": "Triton launches stubbed", "cuda": f"launched on {_device_name()}, wall time"}

    modules, missing = load_op_modules()
    cases = collect_bench_cases(
        modules, args.batch, args.seq_len, args.channels, args.heads, torch.float32, args.device
    )
    if args.ops:
        cases = select_cases(cases, args.ops, missing)
    print(
        f"CPU microseconds per call, {launches[args.device]}; torch {torch.__version__}, 1 thread, "
        f"{os.cpu_count()} CPUs; batch {args.batch}, seq-len {args.seq_len}, channels {args.channels}, "
        f"median of {args.repeats} x {args.calls} calls"
    )
    header = f"{'op':<24} {'pass':<8}" + "".join(f"{arm:>11}" for arm in ARMS) + f"{'now/before':>12}"
    print(header + "\n" + "-" * len(header))
    per_call: dict[str, float] = {}  # op -> forward+backward microseconds saved per call
    table: dict[str, dict[str, float]] = {}  # "<op> <pass>" -> arm -> median microseconds
    with kernel_paths(args.device):
        for named in cases:
            passes = [False, True] if grad_inputs(named.case.inputs) else [False]
            for backward in passes:
                functions = {arm: call(named.case, arm, backward) for arm in ARMS}
                for arm, function in functions.items():
                    microseconds(function, arm, max(1, args.calls // 10), args.device)  # warm-up
                rounds: dict[str, list[float]] = {arm: [] for arm in ARMS}
                for _ in range(args.repeats):
                    for arm, function in functions.items():
                        rounds[arm].append(microseconds(function, arm, args.calls, args.device))
                medians = {arm: statistics.median(times) for arm, times in rounds.items()}
                ratio = medians["kernel op"] / medians["custom op"]
                name = "fwd+bwd" if backward else "fwd"
                table[f"{named.name} {name}"] = medians
                cells = "".join(f"{medians[arm]:11.1f}" for arm in ARMS)
                print(f"{named.name:<24} {name:<8}{cells}{ratio:11.2f}x", flush=True)
                if backward or len(passes) == 1:
                    per_call[named.case.op] = medians["custom op"] - medians["kernel op"]
    calls = zipformer_m_calls()
    saved_ms = sum(per_call.get(op, 0.0) * count for op, count in calls.items()) / 1e3
    print(
        f"\nZipformer-M, one training forward: {sum(calls.values())} op calls ({calls}); with every kernel on, "
        f"their entry costs {saved_ms:.1f} ms less CPU a step (forward and backward) through kernel ops than "
        "through custom ops, at these medians"
    )
    return table


if __name__ == "__main__":
    main()
