"""Training throughput on one GPU: audio seconds per second, peak memory and model FLOPs utilization per
architecture and variant, f32 vs tf32 vs bf16, eager vs ``torch.compile``, at a fixed batch budget.

One training step = forward (autocast for bf16) + float32 CTC loss normalised per token + backward +
gradient-norm clip + AdamW, as ``training.loop`` does it, on a synthetic batch shaped like LibriSpeech
training data: ``--batch-frames`` padded frames per batch (10 ms frames), utterance lengths drawn from
40-100 % of the longest, targets at ~1 token per 8 frames of a 256-piece vocabulary. Steps are timed with
CUDA events after warm-up (median of ``--steps``); the compiled model's compile time is reported apart.

FLOPs are counted once per (variant, batch) with ``torch.utils.flop_counter.FlopCounterMode`` over one
forward + backward (matrix products and convolutions; element-wise work is not counted, so MFU is a lower
bound). MFU divides FLOPs per second by the matrix-product rate measured on this device in the same run
(an 8192^3 product in the step's dtype: tf32 for f32 steps with TF32 on, fp32 without), so the ratio is
against what this card does, not a datasheet.

    python benchmarks/bench_training_throughput.py                       # CUDA: the full table
    python benchmarks/bench_training_throughput.py --variants demo --modes eager --steps 5
    python benchmarks/bench_training_throughput.py --variants sm zipformer:m w2v-bert:600m   # architectures
    python benchmarks/bench_training_throughput.py --json out.json       # also write the rows

Without CUDA it times the demo variant in f32 eager on the CPU, as a smoke check of the script.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time

# The Triton kernels must compile, not run in the interpreter, when timed.
os.environ.pop("TRITON_INTERPRET", None)

import torch

# The step, batch, FLOP count, matmul ceiling, timers and table the training-step benchmarks share.
from training_step import (
    VOCAB_SIZE,
    count_flops,
    matmul_rates,
    parse_model,
    print_table,
    synthetic_batch,
    time_cpu,
    time_cuda,
    train_step,
)

from asr_pipeline.models.registry import build_model, default_input_dim


def bench_case(variant: str, precision: str, mode: str, args, device: torch.device, flops: dict) -> dict:
    torch.manual_seed(0)
    torch._dynamo.reset()
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = precision == "tf32"
    architecture, size = parse_model(variant)
    input_dim = default_input_dim(architecture)
    model = build_model(architecture, size, input_dim=input_dim, vocab_size=VOCAB_SIZE, dropout=0.1).to(
        device
    )
    params = sum(p.numel() for p in model.parameters())
    batch = synthetic_batch(args.batch_frames, args.max_frames, device, architecture=architecture)
    if variant not in flops:
        flops[variant] = count_flops(model, batch, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    runner = model
    compile_sec = None
    if mode == "compile":
        runner = torch.compile(model)
        started = time.perf_counter()
        train_step(runner, optimizer, batch, precision, device)
        if device.type == "cuda":
            torch.cuda.synchronize()
        compile_sec = time.perf_counter() - started
    step = lambda: train_step(runner, optimizer, batch, precision, device)  # noqa: E731
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        times = time_cuda(step, warmup=args.warmup, repeats=args.steps)
        peak_gib = torch.cuda.max_memory_allocated() / 2**30
    else:
        times = time_cpu(step, warmup=1, repeats=args.steps)
        peak_gib = math.nan
    step_sec = statistics.median(times)
    spread = (max(times) - min(times)) / step_sec
    return {
        "variant": variant,
        "params_m": params / 1e6,
        "precision": precision,
        "mode": mode,
        "batch": int(batch["features"].shape[0]),
        "max_frames": args.max_frames,
        "audio_sec_per_batch": batch["audio_sec"],
        "step_ms": step_sec * 1e3,
        "step_spread": spread,
        "audio_sec_per_sec": batch["audio_sec"] / step_sec,
        "peak_gib": peak_gib,
        "tflops_per_step": flops[variant] / 1e12,
        "achieved_tflops": flops[variant] / step_sec / 1e12,
        "compile_sec": compile_sec,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--variants",
        nargs="+",
        default=["demo", "xs", "s"],
        help="Squeezeformer variants, or ARCHITECTURE:VARIANT (zipformer:m, w2v-bert:600m)",
    )
    parser.add_argument("--precisions", nargs="+", default=["f32", "tf32", "bf16"])
    parser.add_argument("--modes", nargs="+", default=["eager", "compile"])
    parser.add_argument(
        "--compile-precisions",
        nargs="+",
        default=["bf16"],
        help="precisions also timed compiled (minutes each)",
    )
    parser.add_argument("--batch-frames", type=int, default=32_000, help="padded frames per batch")
    parser.add_argument("--max-frames", type=int, default=1600, help="the longest utterance (16 s)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--json", help="write every row to this file")
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    if not cuda:
        print("note: no CUDA device; timing demo f32 eager on the CPU as a smoke check (no MFU)")
        args.variants, args.precisions, args.modes = ["demo"], ["f32"], ["eager"]
        args.batch_frames, args.max_frames, args.steps = 4000, 800, 2
    rates = {}
    if cuda:
        rates = matmul_rates(device)
        print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, triton "
              f"{__import__('triton').__version__}")  # fmt: skip
        print("measured 8192^3 matmul TFLOP/s: " + ", ".join(f"{k} {v / 1e12:.0f}" for k, v in rates.items()))
    flops: dict[str, int] = {}
    rows = []
    for variant in args.variants:
        for precision in args.precisions:
            for mode in args.modes:
                if mode == "compile" and precision not in args.compile_precisions:
                    continue
                row = bench_case(variant, precision, mode, args, device, flops)
                row["mfu"] = row["achieved_tflops"] * 1e12 / rates[precision] if cuda else math.nan
                rows.append(row)
                print(json.dumps(row), flush=True)
    header = (
        f"{'variant':>14} {'Mparam':>6} {'prec':>5} {'mode':>7} | {'B':>3} {'step ms':>8} {'spread':>6} | "
        f"{'audio s/s':>9} {'peak GiB':>8} | {'TFLOP/s':>7} {'MFU':>6} | {'vs eager':>8} {'compile s':>9}"
    )
    eager = {(r["variant"], r["precision"]): r["step_ms"] for r in rows if r["mode"] == "eager"}

    def line(r: dict) -> str:
        speedup = eager.get((r["variant"], r["precision"]), math.nan) / r["step_ms"]
        compile_sec = "" if r["compile_sec"] is None else f"{r['compile_sec']:9.1f}"
        return (
            f"{r['variant']:>14} {r['params_m']:6.1f} {r['precision']:>5} {r['mode']:>7} | {r['batch']:>3} "
            f"{r['step_ms']:8.1f} {r['step_spread']:6.2f} | {r['audio_sec_per_sec']:9.0f} {r['peak_gib']:8.2f} | "
            f"{r['achieved_tflops']:7.1f} {r['mfu']:6.1%} | {speedup:8.2f} {compile_sec:>9}"
        )

    print_table(header, map(line, rows))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(
                {"rates_tflops": {k: v / 1e12 for k, v in rates.items()}, "rows": rows}, handle, indent=1
            )


if __name__ == "__main__":
    main()
