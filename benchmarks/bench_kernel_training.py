"""Training step of zipformer and squeezeformer at the same batch with the ``asr_kernels`` ops as Triton kernels
(``kernels: triton``), as their PyTorch references (``kernels: reference``), and as the references under
``torch.compile``, side by side (issue 12).

One step is ``training_step.train_step``, what ``training.loop`` does per batch: forward (bf16
autocast for ``--precision bf16``), float32 CTC loss over the batch's target tokens, backward, gradient-norm
clip at 5, AdamW. Models come from the registry (``models.registry.build_model``, dropout 0.1); the batch is
``training_step.synthetic_batch``: ``--batch`` utterances, the longest ``--frames`` 10 ms frames,
the others 40-100 % of it, the same batch for every model.

Side by side: every step, each variant takes one step on the batch, in an order rotated per step, so whatever
else loads the machine hits all variants alike; each variant has its own copy of the same initial weights,
and each step starts every variant from the same seed (the eager variants draw the same dropout). The first
``--warmup`` steps (torch.compile's compile, Triton's JIT) are left out of the medians. CUDA steps are timed
with CUDA events, CPU steps with ``time.perf_counter``.

Which ops a model calls depends on how far it is routed onto ``asr_kernels`` (``count_calls`` over one eager
step is printed per model): an op a model does not call yet makes no difference between the variants. On the
CPU the Triton kernels run only in Triton's interpreter, a correctness tool, so there it compares the
reference eager and compiled only, on the tiny sizes with one thread (the demo sizes take ~10 min per cold
compile here: ``bench_compile_training.py``; two threads on a shared 2-core box made compiled steps wait at
OpenMP barriers for seconds). A timed step that compiled again (a recompile) is counted in the table.

    .venv/bin/python benchmarks/bench_kernel_training.py          # CUDA: bf16 and f32; CPU: tiny, f32 (~6 min)
    .venv/bin/python benchmarks/bench_kernel_training.py --models zipformer:demo squeezeformer:demo --steps 10
    .venv/bin/python benchmarks/bench_kernel_training.py --variants triton reference --json out.json
"""

from __future__ import annotations

import os

# The Triton kernels must compile, not run in the interpreter, when timed; read when asr_kernels is imported.
os.environ.pop("TRITON_INTERPRET", None)

import argparse
import json
import logging
import statistics
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

# The step, batch and compiled-graph count the training-step benchmarks share.
from training_step import VOCAB_SIZE, compiled_graphs, loss_of, parse_model, synthetic_batch, train_step

from asr_kernels import count_calls, use_kernels
from asr_pipeline.models.registry import build_model, default_input_dim

# name -> (kernels choice, compiled): the three ways of running the same step.
VARIANTS = {
    "triton": ("triton", False),
    "reference": ("reference", False),
    "reference+compile": ("reference", True),
}
BASELINE = "reference"
# (models, batch, frames, steps, warmup, precisions) per device. CUDA: sizes of similar parameter count
# (zipformer S ~23 M, squeezeformer S ~18 M), 8 utterances of up to 16 s. CPU: the tiny sizes, whose cold compile
# takes 1-4 min each on the 2-core box (demo's takes ~10: bench_compile_training.py).
DEFAULTS = {
    "cuda": (["zipformer:s", "squeezeformer:s"], 8, 1600, 20, 3, ["bf16", "f32"]),
    "cpu": (["zipformer:tiny", "squeezeformer:tiny"], 4, 300, 5, 2, ["f32"]),
}


@dataclass
class Runner:
    variant: str
    model: nn.Module
    forward: nn.Module  # the model, or its compiled wrapper
    optimizer: torch.optim.Optimizer
    step_ms: list[float] = field(default_factory=list)
    peak_mib: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    new_graphs: list[int] = field(default_factory=list)  # graphs torch.compile made during each step

    @property
    def kernels(self) -> str:
        return VARIANTS[self.variant][0]


def build_runner(variant: str, architecture: str, size: str, device: torch.device) -> Runner:
    torch.manual_seed(0)  # the same initial weights for every variant
    model = build_model(
        architecture, size, input_dim=default_input_dim(architecture), vocab_size=VOCAB_SIZE, dropout=0.1
    ).to(device)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    compiled = VARIANTS[variant][1]
    return Runner(variant, model, torch.compile(model, dynamic=False) if compiled else model, optimizer)


def timed_step(runner: Runner, batch: dict, precision: str, device: torch.device) -> None:
    """One step under the runner's kernels choice; appends its milliseconds, peak MiB (CUDA: above what was
    allocated before the step), loss and newly compiled graphs to the runner."""
    graphs = compiled_graphs()
    with use_kernels(runner.kernels):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
            before = torch.cuda.memory_allocated(device)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            loss = train_step(runner.forward, runner.optimizer, batch, precision, device)
            end.record()
            end.synchronize()
            runner.step_ms.append(start.elapsed_time(end))
            runner.peak_mib.append((torch.cuda.max_memory_allocated(device) - before) / 2**20)
        else:
            started = time.perf_counter()
            loss = train_step(runner.forward, runner.optimizer, batch, precision, device)
            runner.step_ms.append((time.perf_counter() - started) * 1e3)
    runner.losses.append(float(loss))
    runner.new_graphs.append(compiled_graphs() - graphs)


def ops_per_step(runner: Runner, batch: dict, precision: str, device: torch.device) -> dict[str, int]:
    """The asr_kernels ops one forward+backward of the eager model calls, by name (no optimizer step)."""
    with use_kernels(runner.kernels), count_calls() as calls:
        loss_of(runner.model, batch, precision, device).backward()
    runner.model.zero_grad(set_to_none=True)
    return dict(sorted(calls.items()))


def bench_model(model_name: str, precision: str, variants: list[str], args, device: torch.device) -> dict:
    architecture, size = parse_model(model_name)
    torch._dynamo.reset()
    runners = [build_runner(variant, architecture, size, device) for variant in variants]
    batch = synthetic_batch(args.batch * args.frames, args.frames, device, architecture=architecture)
    calls = ops_per_step(runners[0], batch, precision, device)
    for step in range(args.warmup + args.steps):
        shift = step % len(runners)
        for runner in runners[shift:] + runners[:shift]:
            torch.manual_seed(1000 + step)  # the same dropout draws for every eager variant
            timed_step(runner, batch, precision, device)
        done = ", ".join(f"{r.variant} {r.step_ms[-1]:.1f} ms" for r in runners)
        label = f"warm-up {step + 1}" if step < args.warmup else f"step {step - args.warmup + 1}"
        print(f"  {model_name} {precision} {label}: {done}", flush=True)
    return summarize(model_name, precision, runners, batch, calls, args.warmup)


def summarize(model_name, precision, runners: list[Runner], batch: dict, calls: dict, warmup: int) -> dict:
    medians = {r.variant: statistics.median(r.step_ms[warmup:]) for r in runners}
    first_losses = {r.variant: r.losses[0] for r in runners}
    rows = []
    for runner in runners:
        steady = runner.step_ms[warmup:]
        rows.append(
            {
                "variant": runner.variant,
                "median_step_ms": medians[runner.variant],
                "p10_p90_ms": [float(np.percentile(steady, 10)), float(np.percentile(steady, 90))],
                "first_step_sec": runner.step_ms[0] / 1e3,  # with compile / JIT
                # Speed-up: the other's median over this one's (> 1: this one is faster).
                "speedup_vs_reference": medians[BASELINE] / medians[runner.variant]
                if BASELINE in medians
                else None,
                "speedup_vs_reference_compile": (
                    medians["reference+compile"] / medians[runner.variant]
                    if "reference+compile" in medians
                    else None
                ),
                "peak_mib": max(runner.peak_mib[warmup:]) if runner.peak_mib else None,
                "first_loss": first_losses[runner.variant],
                # A timed step that compiled (a guard failed: a recompile) is slow for that reason alone.
                "steps_compiling_after_warmup": sum(1 for n in runner.new_graphs[warmup:] if n),
            }
        )
    return {
        "model": model_name,
        "params_m": sum(p.numel() for p in runners[0].model.parameters()) / 1e6,
        "precision": precision,
        "batch": int(batch["features"].shape[0]),
        "frames": int(batch["features"].shape[1]),
        "audio_sec": batch["audio_sec"],
        "ops_per_step": calls,
        "steps": len(runners[0].step_ms) - warmup,
        "rows": rows,
    }  # fmt: skip


def print_summary(summary: dict) -> None:
    calls = ", ".join(f"{op} {count}" for op, count in summary["ops_per_step"].items())
    print(
        f"\n{summary['model']} ({summary['params_m']:.1f} M params), {summary['precision']}, batch "
        f"{summary['batch']} x {summary['frames']} frames ({summary['audio_sec']:.1f} s of audio), median of "
        f"{summary['steps']} steps"
    )
    print(f"asr_kernels calls per step: {calls or 'none yet: every variant runs the same eager ops'}")
    header = (
        f"{'variant':<18} | {'step ms':>9} {'p10-p90':>15} {'first s':>9} | {'x reference':>11} "
        f"{'x ref+compile':>13} | {'peak MiB':>9} | {'step-1 loss':>11} | {'recompiling steps':>17}"
    )
    print(header)
    print("-" * len(header))

    def ratio(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}x"

    for row in summary["rows"]:
        low, high = row["p10_p90_ms"]
        peak = "-" if row["peak_mib"] is None else f"{row['peak_mib']:.0f}"
        print(
            f"{row['variant']:<18} | {row['median_step_ms']:9.1f} {f'{low:.1f}-{high:.1f}':>15} "
            f"{row['first_step_sec']:9.1f} | {ratio(row['speedup_vs_reference']):>11} "
            f"{ratio(row['speedup_vs_reference_compile']):>13} | {peak:>9} | {row['first_loss']:11.5f} | "
            f"{row['steps_compiling_after_warmup']:>17}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["cuda", "cpu"], help="default: cuda when a GPU is visible")
    parser.add_argument("--models", nargs="+", help="ARCHITECTURE:VARIANT (default: zipformer:s squeezeformer:s "
                        "on CUDA, the tiny sizes on the CPU)")  # fmt: skip
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), help="default: all (CPU: no triton)")
    parser.add_argument(
        "--precisions", nargs="+", choices=["f32", "bf16"], help="default: bf16 f32 (CPU: f32)"
    )
    parser.add_argument("--batch", type=int, help="utterances per batch (default: 8; CPU 4)")
    parser.add_argument(
        "--frames", type=int, help="10 ms frames of the longest utterance (default: 1600; CPU 300)"
    )
    parser.add_argument("--steps", type=int, help="timed steps per variant (default: 20; CPU 5)")
    parser.add_argument("--warmup", type=int, help="untimed first steps per variant (default: 3; CPU 2)")
    parser.add_argument(
        "--threads",
        type=int,
        help="torch CPU threads (default: 1 on the CPU, as a demo rank has; torch's own on CUDA). With more "
        "threads than idle cores, compiled CPU kernels wait at OpenMP barriers (seconds per step seen here)",
    )
    parser.add_argument("--json", help="write the summaries and per-step times here")
    args = parser.parse_args()
    backend = args.backend or ("cuda" if torch.cuda.is_available() else "cpu")
    if backend == "cuda" and not torch.cuda.is_available():
        parser.error("--backend cuda: no CUDA device is visible here")
    models, batch, frames, steps, warmup, precisions = DEFAULTS[backend]
    args.models = args.models or models
    args.batch, args.frames = args.batch or batch, args.frames or frames
    args.steps, args.warmup = args.steps or steps, warmup if args.warmup is None else args.warmup
    args.precisions = args.precisions or precisions
    variants = args.variants or list(VARIANTS)
    threads = args.threads or (1 if backend == "cpu" else None)
    if threads:
        torch.set_num_threads(threads)
    device = torch.device(backend)
    # A CPU-only machine's CUDA notice and dynamo's graph-break warnings would land in the progress lines.
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    logging.getLogger("torch._dynamo").setLevel(logging.ERROR)
    # A relative shift through as_strided is a graph break (until the models call asr_kernels' RelativeShift).
    warnings.filterwarnings("ignore", message="Dynamo does not know how to trace")

    if backend == "cuda":
        import triton

        print(
            f"device: {torch.cuda.get_device_name(device)}, torch {torch.__version__}, triton {triton.__version__}"
        )
    else:
        print(f"device: cpu ({torch.get_num_threads()} threads), torch {torch.__version__}")
        if "triton" in variants:
            variants.remove("triton")
            print(
                "note: the Triton kernels are GPU-only here (on the CPU only Triton's interpreter runs them, a "
                "correctness tool, not a speed measure): timing reference and reference+compile only"
            )
    summaries = []
    for model_name in args.models:
        for precision in args.precisions:
            summaries.append(bench_model(model_name, precision, variants, args, device))
    print(
        "\nspeed-up: the other variant's median step over this one's (> 1: faster); first s: the first step's "
        "seconds (compile, JIT); peak: CUDA memory above the resident weights and optimizer state; step-1 loss: "
        "the same weights, batch and dropout seed for every variant (compiled steps draw inductor's own dropout)"
    )
    for summary in summaries:
        print_summary(summary)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"backend": backend, "summaries": summaries}, handle, indent=1)


if __name__ == "__main__":
    main()
