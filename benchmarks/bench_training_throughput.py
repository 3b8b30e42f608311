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
import contextlib
import json
import math
import os
import statistics
import time

# The Triton kernels must compile, not run in the interpreter, when timed.
os.environ.pop("TRITON_INTERPRET", None)

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from asr_pipeline.models.registry import build_model, default_input_dim, frontend_of

FRAME_SEC = {"fbank": 0.01, "w2v-bert": 0.02}  # audio per input frame: w2v-bert stacks two 10 ms frames
TOKENS_PER_SEC = 12.5  # ~1 target per 8 fbank frames, whatever the frame rate
VOCAB_SIZE = 257  # 256 pieces + blank


def parse_model(text: str) -> tuple[str, str]:
    """``"zipformer:m"`` -> ("zipformer", "m"); a bare variant is Squeezeformer's (``"xs"``)."""
    architecture, _, variant = text.rpartition(":")
    return architecture or "squeezeformer", variant


def synthetic_batch(
    batch_frames: int,
    max_frames: int,
    device: torch.device,
    seed: int = 0,
    architecture: str = "squeezeformer",
) -> dict:
    """(B, T, F) features with B = batch_frames // max_frames, lengths in [0.4, 1] * T, longest = T; frame
    counts are in 10 ms fbank frames and halved for an architecture whose frontend has 20 ms frames."""
    generator = torch.Generator().manual_seed(seed)
    batch = max(1, batch_frames // max_frames)
    frame_sec = FRAME_SEC[frontend_of(architecture)]
    max_frames = round(max_frames * FRAME_SEC["fbank"] / frame_sec)
    lengths = torch.randint(int(0.4 * max_frames), max_frames + 1, (batch,), generator=generator)
    lengths[0] = max_frames
    target_lengths = (lengths * frame_sec * TOKENS_PER_SEC).long().clamp(min=1)
    targets = torch.randint(1, VOCAB_SIZE, (batch, int(target_lengths.max())), generator=generator)
    features = torch.randn(batch, max_frames, default_input_dim(architecture), generator=generator)
    return {
        "features": features.to(device),
        "lengths": lengths.to(device),
        "targets": targets.to(device),
        "target_lengths": target_lengths.to(device),
        "audio_sec": float(lengths.sum()) * frame_sec,
    }


def autocast(precision: str, device: torch.device):
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def loss_of(model, batch: dict, precision: str, device: torch.device) -> torch.Tensor:
    with autocast(precision, device):
        log_probs, out_lengths = model(batch["features"], batch["lengths"])  # (B, T', V), (B,)
    losses = F.ctc_loss(
        log_probs.float().transpose(0, 1),
        batch["targets"],
        out_lengths,
        batch["target_lengths"],
        reduction="none",
        zero_infinity=True,
    )  # (B,)
    return losses.sum() / batch["target_lengths"].sum()


def train_step(model, optimizer, batch: dict, precision: str, device: torch.device) -> None:
    loss_of(model, batch, precision, device).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def count_flops(model, batch: dict, device: torch.device) -> int:
    with FlopCounterMode(display=False) as counter:
        loss_of(model, batch, "f32", device).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def matmul_rate(dtype: torch.dtype, tf32: bool, device: torch.device, size: int = 8192) -> float:
    """Measured dense matrix-product FLOP/s on random data (median of 10 after warm-up)."""
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        a = torch.randn(size, size, device=device, dtype=dtype)
        b = torch.randn(size, size, device=device, dtype=dtype)
        times = time_cuda(lambda: a @ b, warmup=3, repeats=10)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return 2 * size**3 / statistics.median(times)


def time_cuda(fn, warmup: int, repeats: int) -> list[float]:
    """Seconds per call, measured with CUDA events around each call."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return times


def time_cpu(fn, warmup: int, repeats: int) -> list[float]:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return times


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
        rates = {
            "f32": matmul_rate(torch.float32, False, device),
            "tf32": matmul_rate(torch.float32, True, device),
            "bf16": matmul_rate(torch.bfloat16, False, device),
        }
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
    print(header)
    print("-" * len(header))
    eager = {(r["variant"], r["precision"]): r["step_ms"] for r in rows if r["mode"] == "eager"}
    for r in rows:
        speedup = eager.get((r["variant"], r["precision"]), math.nan) / r["step_ms"]
        compile_sec = "" if r["compile_sec"] is None else f"{r['compile_sec']:9.1f}"
        print(
            f"{r['variant']:>14} {r['params_m']:6.1f} {r['precision']:>5} {r['mode']:>7} | {r['batch']:>3} "
            f"{r['step_ms']:8.1f} {r['step_spread']:6.2f} | {r['audio_sec_per_sec']:9.0f} {r['peak_gib']:8.2f} | "
            f"{r['achieved_tflops']:7.1f} {r['mfu']:6.1%} | {speedup:8.2f} {compile_sec:>9}"
        )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(
                {"rates_tflops": {k: v / 1e12 for k, v in rates.items()}, "rows": rows}, handle, indent=1
            )


if __name__ == "__main__":
    main()
