"""``asr-pipeline kernel-bench``: every op of ``asr_kernels`` timed as eager reference, ``torch.compile``d
reference and Triton kernel, forward and forward+backward, at the reference trainer's sizes and flags.

The measuring lives in ``asr_kernels._measure`` (fed by each op module's ``bench_case``); this module parses
the flags, prints the table and writes ``--json``. On the CPU only the references run: Triton kernels run there
only in Triton's interpreter, a correctness tool thousands of times slower than the kernel, so timing it would
say nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from asr_pipeline.cli.common import HelpFormatter, UsageError

BACKENDS = ("cuda", "cpu")
DTYPES = ("float32", "bfloat16", "float16")
# Half precision on CUDA: what training runs the hot-spot ops in (bf16 autocast) and where a memory-bound
# kernel's saving shows most; float32 on the CPU, whose half-precision kernels are slow emulations.
DEFAULT_DTYPE = {"cuda": "bfloat16", "cpu": "float32"}
# --build-for's architectures: their compute capabilities (the A100; the H100 and H200).
BUILD_ARCHITECTURES = {"sm80": 80, "sm90": 90}
CPU_NOTE = (
    "Triton kernels are GPU-only here: on the CPU they run only in Triton's interpreter (TRITON_INTERPRET=1), "
    "a correctness tool, not a speed measure; timing the references (eager and torch.compile) only"
)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "kernel-bench",
        formatter_class=HelpFormatter,
        help="time the Triton kernels against their eager and torch.compile references",
        description="Per op of asr_kernels, forward and forward+backward: median ms of the eager reference, "
        "torch.compile(reference) and the Triton kernel, speed-ups, achieved GB/s against this device's "
        "measured copy bandwidth, and peak memory (CUDA). On --backend cpu the references only.",
    )
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        help="device to run on (default: cuda when a GPU is visible, else cpu)",
    )
    parser.add_argument("--batch", type=int, default=8, help="utterances per batch (B)")
    parser.add_argument("--seq-len", type=int, default=512, help="frames per utterance (T)")
    parser.add_argument("--channels", type=int, default=512, help="model width (C)")
    parser.add_argument("--heads", type=int, default=8, help="attention heads (H)")
    parser.add_argument(
        "--dtype",
        choices=DTYPES,
        help="input dtype (default: bfloat16 on cuda, float32 on cpu)",
    )
    parser.add_argument(
        "--ops",
        nargs="+",
        metavar="OP",
        help="op modules (glu, swoosh, masks, ...) or single ops (swoosh_l, attention_mask_4d, ...) to time "
        "(default: all)",
    )
    parser.add_argument(
        "--warmup", type=int, default=5, help="untimed calls per variant first (compile, JIT)"
    )
    parser.add_argument(
        "--iters", type=int, default=20, help="timed calls per variant; the median is reported"
    )
    parser.add_argument(
        "--no-compile", action="store_true", help="leave torch.compile out (it compiles for seconds per op)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        help="torch CPU threads (default: torch's own); 1 keeps compiled CPU kernels from waiting on a busy "
        "core of a shared machine",
    )
    parser.add_argument(
        "--build-for",
        metavar="ARCH",
        choices=list(BUILD_ARCHITECTURES),
        help="time nothing: compile every kernel the ops launch at these sizes for this GPU architecture "
        f"({', '.join(BUILD_ARCHITECTURES)}: sm90 is the H100 and H200; no GPU needed, TRITON_INTERPRET unset) "
        "and print each one's registers, spills, shared memory and global load and store widths",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the results here")
    parser.set_defaults(handler=run)


def resolve_backend(args: argparse.Namespace) -> str:
    import torch

    from asr_kernels._dispatch import HAS_TRITON, interpreter_enabled

    backend = args.backend or ("cuda" if torch.cuda.is_available() else "cpu")
    if backend == "cuda":
        if not torch.cuda.is_available():
            raise UsageError("--backend cuda: no CUDA device is visible here; use --backend cpu")
        if not HAS_TRITON:
            raise UsageError("--backend cuda: Triton is not installed, so there are no kernels to time")
        if interpreter_enabled():
            raise UsageError(
                "--backend cuda with TRITON_INTERPRET set: Triton would interpret the kernels on the CPU, "
                "thousands of times slower; unset TRITON_INTERPRET and rerun"
            )
    return backend


def check_sizes(args: argparse.Namespace) -> None:
    for flag in ("batch", "seq_len", "channels", "heads", "warmup", "iters", "threads"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            raise UsageError(f"--{flag.replace('_', '-')} must be at least 1, got {getattr(args, flag)}")


def run(args: argparse.Namespace) -> int:
    check_sizes(args)
    if args.build_for:
        return build(args)
    backend = resolve_backend(args)
    import torch

    previous_threads = torch.get_num_threads()
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        return bench(args, backend)
    finally:
        torch.set_num_threads(previous_threads)


def bench(args: argparse.Namespace, backend: str) -> int:
    import torch

    from asr_kernels import _measure

    device = torch.device(backend)
    dtype_name = args.dtype or DEFAULT_DTYPE[backend]
    variants = [v for v in _measure.VARIANTS if not (v == "compile" and args.no_compile)]
    if backend == "cpu":
        variants.remove("triton")
    cases, missing = bench_cases(args, device, dtype_name)

    copy_gb_per_s = _measure.copy_bandwidth_gb_per_s(device, args.warmup, args.iters)
    print(header_lines(args, backend, device, dtype_name, copy_gb_per_s, missing), flush=True)
    results = []
    for case in cases:
        for result in _measure.measure_case(case, device, variants, args.warmup, args.iters):
            if not results:
                print(table_header())
            results.append(result)
            print(table_row(result, copy_gb_per_s), flush=True)
    if not results:
        print("no op to time: every one asked for is still missing")
    if args.json:
        write_json(
            Path(args.json),
            results_json(args, backend, device, dtype_name, copy_gb_per_s, missing, variants, results),
        )
    return 0


def bench_cases(args: argparse.Namespace, device, dtype_name: str) -> tuple[list, list[str]]:
    """The cases of the ops asked for (``--ops``, default all) at the flags' sizes, and the op modules that do
    not exist yet."""
    import torch

    from asr_kernels import _bench, _measure

    modules, missing = _measure.load_op_modules()
    if args.ops and set(args.ops) <= set(_bench.OP_MODULES):
        # Only the modules asked for; a single op's module is only known once the cases exist.
        modules = {name: module for name, module in modules.items() if name in args.ops}
        missing = [name for name in missing if name in args.ops]
    cases = _measure.collect_bench_cases(
        modules, args.batch, args.seq_len, args.channels, args.heads, getattr(torch, dtype_name), device
    )
    if args.ops:
        try:
            cases = _measure.select_cases(cases, args.ops, missing)
        except ValueError as error:
            raise UsageError(f"--ops: {error}") from None
    return cases, missing


def build(args: argparse.Namespace) -> int:
    """``--build-for``: every kernel the cases launch, compiled for the architecture; 1 if one failed."""
    import torch
    import triton

    from asr_kernels._dispatch import HAS_TRITON

    if not HAS_TRITON:
        raise UsageError("--build-for: Triton is not installed, so there are no kernels to build")
    from asr_kernels._build import build_cases, check_buildable

    try:
        check_buildable()
    except RuntimeError as error:
        raise UsageError(f"--build-for: {error}") from None

    dtype_name = args.dtype or DEFAULT_DTYPE["cuda"]
    cases, missing = bench_cases(args, torch.device("cpu"), dtype_name)
    print(
        f"kernel-bench --build-for {args.build_for}: triton {triton.__version__}, torch {torch.__version__}, "
        f"{dtype_name}; batch {args.batch}, seq-len {args.seq_len}, channels {args.channels}, heads "
        f"{args.heads}; each kernel the ops launch forward and forward+backward, compiled, none run",
        flush=True,
    )
    for name in missing:
        print(f"note: asr_kernels.{name} does not exist yet: skipped")
    builds = build_cases(cases, BUILD_ARCHITECTURES[args.build_for])
    print(build_header())
    for kernel in builds:
        print(build_row(kernel))
    failed = [kernel for kernel in builds if kernel.error]
    if args.json:
        payload = {
            "architecture": args.build_for,
            "triton": triton.__version__,
            "torch": torch.__version__,
            "dtype": dtype_name,
            **{size: getattr(args, size) for size in ("batch", "seq_len", "channels", "heads")},
            "kernels": [dataclasses.asdict(kernel) for kernel in builds],
        }
        write_json(Path(args.json), payload)
    if failed:
        print(f"{len(failed)} of {len(builds)} kernels do not compile for {args.build_for}", file=sys.stderr)
    return 1 if failed else 0


_BUILD_COLUMNS = (("op", 24), ("kernel", 40), ("regs", 5), ("spill B", 7), ("smem B", 7), ("ld bits", 8))


def build_header() -> str:
    line = " ".join(f"{name:<{w}}" if i < 2 else f"{name:>{w}}" for i, (name, w) in enumerate(_BUILD_COLUMNS))
    line += "  st bits  meta"
    return f"{line}\n{'-' * len(line)}"


def build_row(kernel) -> str:
    """One kernel: its costs and meta-parameters, or the compiler's error."""
    (_, op_width), (_, kernel_width), *widths = _BUILD_COLUMNS
    head = f"{kernel.op:<{op_width}} {kernel.kernel:<{kernel_width}}"
    if kernel.error:
        return f"{head} error: {kernel.error}"
    bits = [",".join(map(str, kernel.load_bits)) or "-", ",".join(map(str, kernel.store_bits)) or "-"]
    numbers = [kernel.registers, kernel.spill_bytes, kernel.shared_bytes, bits[0]]
    cells = " ".join(f"{value:>{w}}" for value, (_, w) in zip(numbers, widths, strict=True))
    meta = " ".join(f"{key}={value}" for key, value in kernel.meta.items())
    return f"{head} {cells}  {bits[1]:>7}  {meta}"


def write_json(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"wrote {path}", file=sys.stderr)


# --- output -------------------------------------------------------------------------------------------------
def device_name(device) -> str:
    import torch

    if device.type == "cuda":
        import triton

        return f"{torch.cuda.get_device_name(device)} (triton {triton.__version__})"
    threads = torch.get_num_threads()
    return f"cpu ({threads} thread{'s' if threads > 1 else ''})"


def header_lines(
    args, backend: str, device, dtype_name: str, copy_gb_per_s: float, missing: list[str]
) -> str:
    import torch

    from asr_kernels._measure import COPY_BYTES

    lines = [
        f"kernel-bench on {device_name(device)}, torch {torch.__version__}, {dtype_name}; batch {args.batch}, "
        f"seq-len {args.seq_len}, channels {args.channels}, heads {args.heads}; median of {args.iters} "
        f"calls after {args.warmup} warm-up",
        f"copy bandwidth: {copy_gb_per_s:.1f} GB/s (a {COPY_BYTES[backend] // 2**20} MiB tensor copy on "
        f"{backend}, read + write)",
    ]
    if backend == "cpu":
        lines.append(f"note: {CPU_NOTE}")
        lines.append("note: peak memory is measured on CUDA only (the CPU allocator keeps no peak)")
    if args.no_compile:
        lines.append("note: --no-compile: torch.compile left out")
    for name in missing:
        lines.append(f"note: asr_kernels.{name} does not exist yet: skipped")
    lines.append(
        "speed-up: the other's time over this one's (> 1: faster); GB/s: the op's unavoidable traffic over "
        "its time, (%) of the copy bandwidth"
    )
    return "\n".join(lines)


# (group title, [(column, width)]): two header lines, the groups separated by " | ".
_TABLE = (
    ("", [("op", 24), ("pass", 7)]),
    ("median ms", [("eager", 9), ("compile", 9), ("triton", 9)]),
    ("speed-up vs eager", [("compile", 8), ("triton", 8)]),
    ("vs compile", [("triton", 10)]),
    ("GB/s (% of copy bandwidth)", [("eager", 13), ("compile", 13), ("triton", 13)]),
    ("peak MiB", [("eager", 8), ("compile", 8), ("triton", 8)]),
)


def _join(cells_per_group: list[list[str]]) -> str:
    return " | ".join(" ".join(cells) for cells in cells_per_group)


def table_header() -> str:
    titles = [[f"{title:^{sum(w for _, w in columns) + len(columns) - 1}}"] for title, columns in _TABLE]
    # op and pass flush left, as their values are; numbers flush right.
    names = [[f"{name:<{w}}" for name, w in _TABLE[0][1]]]
    names += [[f"{name:>{w}}" for name, w in columns] for _, columns in _TABLE[1:]]
    line = _join(names)
    return f"{_join(titles)}\n{line}\n{'-' * len(line)}"


def _cells(values: list, width_of: list[int], render) -> list[str]:
    return [f"{'-':>{w}}" if v is None else render(v, w) for v, w in zip(values, width_of, strict=True)]


def _widths(group: int) -> list[int]:
    return [w for _, w in _TABLE[group][1]]


def _bandwidth(value: float, copy_gb_per_s: float, width: int) -> str:
    number = f"{value:.1f}" if value >= 1 else f"{value:.3f}"
    return f"{number} ({value / copy_gb_per_s:.0%})".rjust(width)


def table_row(result, copy_gb_per_s: float) -> str:
    """One line of the table: ``-`` where a variant did not run (Triton on the CPU, --no-compile)."""
    variants = ("eager", "compile", "triton")
    timings = result.timings
    ms = [timings[v].ms if v in timings else None for v in variants]
    peaks = [timings[v].peak_bytes if v in timings else None for v in variants]
    against_eager = [result.speedup("compile", "eager"), result.speedup("triton", "eager")]
    against_compile = [result.speedup("triton", "compile")]
    bandwidths = [result.gb_per_s(v) for v in variants]
    return _join(
        [
            [f"{result.op:<{_widths(0)[0]}}", f"{result.pass_name:<{_widths(0)[1]}}"],
            _cells(ms, _widths(1), lambda v, w: f"{v:{w}.3f}"),
            _cells(against_eager, _widths(2), lambda v, w: f"{v:.2f}x".rjust(w)),
            _cells(against_compile, _widths(3), lambda v, w: f"{v:.2f}x".rjust(w)),
            _cells(bandwidths, _widths(4), lambda v, w: _bandwidth(v, copy_gb_per_s, w)),
            _cells(peaks, _widths(5), lambda v, w: f"{v / 2**20:{w}.1f}"),
        ]
    )


def results_json(args, backend, device, dtype_name, copy_gb_per_s, missing, variants, results) -> dict:
    import torch

    rows = []
    for result in results:
        rows.append(
            {
                "op": result.op,
                "module": result.module,
                "pass": result.pass_name,
                "bytes": result.bytes_moved,
                "variants": {
                    variant: {
                        "ms": timing.ms,
                        "gb_per_s": result.gb_per_s(variant),
                        "fraction_of_copy_bandwidth": result.gb_per_s(variant) / copy_gb_per_s,
                        "peak_mib": None if timing.peak_bytes is None else timing.peak_bytes / 2**20,
                    }
                    for variant, timing in result.timings.items()
                },
                "speedup": {
                    "compile_vs_eager": result.speedup("compile", "eager"),
                    "triton_vs_eager": result.speedup("triton", "eager"),
                    "triton_vs_compile": result.speedup("triton", "compile"),
                },
            }
        )
    return {
        "backend": backend,
        "device": device_name(device),
        "torch": torch.__version__,
        "dtype": dtype_name,
        "batch": args.batch,
        "seq_len": args.seq_len,
        "channels": args.channels,
        "heads": args.heads,
        "warmup": args.warmup,
        "iters": args.iters,
        "variants": variants,
        "copy_gb_per_s": copy_gb_per_s,
        "skipped_missing_modules": missing,
        "notes": [CPU_NOTE] if backend == "cpu" else [],
        "results": rows,
    }
