"""GLU over the last dim, (R, 2C) -> (R, C): eager F.glu, the decomposed reference, torch.compile, our kernel.

On CUDA it times forward and forward+backward (torch.utils.benchmark, which synchronizes and warms up) and
measures the peak memory each allocates above its inputs, then prints ratios (ours / eager, ours / compile;
below 1 means ours is faster or smaller). On a machine without CUDA the kernel has nothing to run on, so it
times the reference path that ``asr_kernels.glu`` falls back to, and says so.

    .venv/bin/python benchmarks/bench_glu.py        # or: make bench
"""

from __future__ import annotations

import logging
import os

# Interpreted kernels run in Python, thousands of times slower; timing them would mean nothing.
os.environ.pop("TRITON_INTERPRET", None)

import torch
import torch.nn.functional as F

from asr_kernels import glu, triton_available
from asr_kernels.glu import glu_reference

# torch.utils.benchmark imports cpp_extension, which warns on every CPU-only machine that it found no CUDA.
logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)

# (R = B * T after subsampling, C): 32 utterances x 400 frames (16 s at 40 ms) at the widths of
# Squeezeformer-XS (144), Conformer-M (256), Conformer-L (512), and a large stress case.
CUDA_SIZES = [(12_800, 144), (12_800, 256), (32_768, 512), (65_536, 1024)]
CUDA_DTYPES = [torch.bfloat16, torch.float32]
CPU_SIZES = [(12_800, 144), (12_800, 256)]
MIN_RUN_TIME_S = 0.5


def eager_glu(h: torch.Tensor) -> torch.Tensor:
    return F.glu(h, dim=-1)


def forward_and_backward(fn, h: torch.Tensor, grad_out: torch.Tensor) -> None:
    (grad_h,) = torch.autograd.grad(fn(h), h, grad_out)
    del grad_h


def time_ms(stmt, *args) -> float:
    from torch.utils import benchmark  # after the logger above is quietened

    for _ in range(5):  # warm-up: Triton JIT, inductor compile, allocator caching, first-touch page faults
        stmt(*args)
    timer = benchmark.Timer(stmt="stmt(*args)", globals={"stmt": stmt, "args": args})
    return timer.blocked_autorange(min_run_time=MIN_RUN_TIME_S).median * 1e3


def peak_mib(stmt, *args) -> float:
    """Peak CUDA memory allocated by one call, above what was allocated before it."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    stmt(*args)
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2**20


def bench_cuda() -> None:
    header = (
        f"{'R x C':>13} {'dtype':>8} {'pass':>8} | {'eager':>7} {'ref':>7} {'compile':>7} {'ours':>7} ms | "
        f"{'ours/eager':>10} {'ours/compile':>12} | {'eager':>6} {'compile':>7} {'ours':>6} MiB peak"
    )
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(header)
    print("-" * len(header))
    for dtype in CUDA_DTYPES:
        for rows, channels in CUDA_SIZES:
            torch._dynamo.reset()  # one compiled graph per case; no recompile limit, no stale guards
            compiled_glu = torch.compile(eager_glu)
            h = torch.randn(rows, 2 * channels, device="cuda", dtype=dtype, requires_grad=True)
            grad_out = torch.randn(rows, channels, device="cuda", dtype=dtype)
            assert triton_available(h)
            impls = {"eager": eager_glu, "ref": glu_reference, "compile": compiled_glu, "ours": glu}
            for pass_name in ("fwd", "fwd+bwd"):
                if pass_name == "fwd":
                    runs = {name: (fn, h.detach()) for name, fn in impls.items()}
                else:
                    runs = {name: (forward_and_backward, fn, h, grad_out) for name, fn in impls.items()}
                ms = {name: time_ms(run[0], *run[1:]) for name, run in runs.items()}
                mib = {name: peak_mib(run[0], *run[1:]) for name, run in runs.items()}
                print(
                    f"{rows:>6} x {channels:<4} {str(dtype)[6:]:>8} {pass_name:>8} | "
                    f"{ms['eager']:7.3f} {ms['ref']:7.3f} {ms['compile']:7.3f} {ms['ours']:7.3f}    | "
                    f"{ms['ours'] / ms['eager']:10.2f} {ms['ours'] / ms['compile']:12.2f} | "
                    f"{mib['eager']:6.1f} {mib['compile']:7.1f} {mib['ours']:6.1f}"
                )


def bench_cpu() -> None:
    print(
        "note: no CUDA device here. The fused GLU kernel targets CUDA (on the CPU it only runs under "
        "TRITON_INTERPRET=1, for tests),\nso this times the reference path asr_kernels.glu falls back to; "
        "GPU figures go in docs/results/kernels.md."
    )
    print(f"device: cpu ({torch.get_num_threads()} threads), torch {torch.__version__}")
    header = f"{'R x C':>13} {'dtype':>8} | {'ref fwd':>8} {'ref fwd+bwd':>12} ms | {'F.glu fwd':>9} ms | {'ref/F.glu':>9}"
    print(header)
    print("-" * len(header))
    for rows, channels in CPU_SIZES:
        h = torch.randn(rows, 2 * channels, requires_grad=True)
        grad_out = torch.randn(rows, channels)
        assert not triton_available(h)
        forward_ms = time_ms(glu, h.detach())
        train_ms = time_ms(forward_and_backward, glu, h, grad_out)
        eager_ms = time_ms(eager_glu, h.detach())
        print(
            f"{rows:>6} x {channels:<4} {'float32':>8} | {forward_ms:8.3f} {train_ms:12.3f}    | "
            f"{eager_ms:9.3f}    | {forward_ms / eager_ms:9.2f}"
        )


if __name__ == "__main__":
    if torch.cuda.is_available():
        bench_cuda()
    else:
        bench_cpu()
