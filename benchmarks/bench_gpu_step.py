"""Issue 36: the training step at the chip's speed? Arms eager/compiled x kernels on/off x f32/tf32/bf16 x
bucketed/exact batch lengths, per model, on a sequence of batches of varying length as a loader makes them.

One step is ``training_step.train_step`` (forward under autocast for bf16, float32 CTC per
token, backward, clip, the engine's fused AdamW), on ``training_step.synthetic_batch`` batches of
``--batch-frames`` padded 10 ms frames whose longest utterance varies over ``--lengths`` (``--batches``
distinct batches). ``exact``: each batch as long as its longest utterance (a new T per batch);
``buckets``: T padded up to one of ``--buckets`` lengths (``data.batching.TimeBuckets.geometric``), the
shapes marked as the engine marks them (``training.compile.mark_batch_shapes``). Per arm: a first pass
over the batches (compiles; ``first_pass_sec``, dynamo's ``compiles``/``recompiles``/``graph_breaks``/
``compile_sec``), then ``--repeats`` timed passes (CUDA events per step): median step ms, audio-s/s over
the timed passes, the same passes queued back to back with one wait at the end (``b2b s/s``: as the engine
runs, its step reading nothing back), peak GiB, recompiles while timed (a steady state has 0), and MFU: FLOPs per audio second
(``FlopCounterMode``, one eager forward + backward: matrix products and convolutions only, so a lower
bound) x audio-s/s over the matmul rate of the arm's precision measured in the same run. The memory copy
rate measured beside it (``memory_tbs``) turns the bytes a compiled step moves (``bench_compiled_bytes.py``,
counted without a GPU) into the floor under its time.

``--largest-batch ARM`` doubles the batch until the step runs out of memory, then bisects
(``largest_fitting``); ``--profile ARM`` writes torch.profiler's top 15 kernels by device time.

    python benchmarks/bench_gpu_step.py --models zipformer:m --arms eager:off:bf16:exact compile:off:bf16:buckets
    python benchmarks/bench_gpu_step.py --models zipformer:m --precisions f32 bf16 --json out.json   # every arm
    python benchmarks/bench_gpu_step.py --smoke     # CPU, tiny model, seconds: the script's own check
    benchmarks/gpu_issue36.sh                       # the prepared GPU session (arms in priority order)

An arm is MODE:KERNELS:PRECISION:SHAPES (eager|compile|layers : on|off|auto|OP : f32|tf32|bf16 :
exact|buckets); compile = the whole model compiled, layers = each repeated layer compiled on its own
(``--compile-scope layers``: a shorter cold compile, no fusion across layers); kernels on = every op's Triton
kernel (CUDA only), off = the PyTorch references, auto = the kernels ``asr_kernels.AUTO_KERNELS`` names (a
run's default), OP (an ``asr_kernels.OPS`` name) = that op's kernel alone. ``--per-op ARM`` times ARM once per
op with that op's kernel alone and prints each op's ratio to ARM with the kernels off: the model-level
evidence ``AUTO_KERNELS`` is set from.
"""

from __future__ import annotations

import os

os.environ.pop("TRITON_INTERPRET", None)  # the kernels compile for the GPU when timed, never interpreted

import argparse
import itertools
import json
import math
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

# The step, batch, FLOP count, matmul ceiling, timers and table the training-step benchmarks share.
from training_step import (
    KERNEL_ARMS,
    VOCAB_SIZE,
    add_model_option_flag,
    compile_options,
    count_flops,
    kernel_choice,
    matmul_rates,
    memory_rate,
    parse_model,
    print_table,
    synthetic_batch,
    time_back_to_back,
    time_calls,
    train_step,
)

from asr_kernels import OPS, auto_runs_kernel, use_kernels
from asr_pipeline.data.batching import TimeBuckets
from asr_pipeline.models.registry import build_model, default_input_dim
from asr_pipeline.training.compile import compile_counts, compile_model, mark_batch_shapes
from asr_pipeline.training.config import OptimConfig
from asr_pipeline.training.optimizers import build_optimizer

MODES, KERNELS, PRECISIONS, SHAPES = (
    ("eager", "compile", "layers"),
    KERNEL_ARMS,
    ("f32", "tf32", "bf16"),
    ("exact", "buckets"),
)


def parse_arm(text: str) -> tuple[str, str, str, str]:
    parts = tuple(text.split(":"))
    choices = (MODES, KERNELS, PRECISIONS, SHAPES)
    wrong = [f"{p!r} is none of {', '.join(c)}" for p, c in zip(parts, choices, strict=False) if p not in c]
    if len(parts) != 4 or wrong:
        raise argparse.ArgumentTypeError(
            f"arm {text!r}: expected MODE:KERNELS:PRECISION:SHAPES, e.g. compile:off:bf16:buckets"
            + "".join(f"; {reason}" for reason in wrong)
        )
    return parts  # type: ignore[return-value]


def arm_name(arm: tuple[str, str, str, str]) -> str:
    return ":".join(arm)


def arms_to_time(args, cuda: bool) -> list[tuple[str, str, str, str]]:
    """``--arms`` (without them and ``--per-op``: every combination of ``--modes``, ``--kernels``,
    ``--precisions``, ``--shapes``), then ``--per-op``'s arm with the kernels off (unless listed) and with each
    op's kernel alone. Off CUDA only the arms with the kernels off and without tf32: the Triton kernels run
    only interpreted on a CPU."""
    every = itertools.product(args.modes, args.kernels, args.precisions, args.shapes)
    arms = list(args.arms or ([] if args.per_op else every))
    if args.per_op:
        mode, _, precision, shapes = args.per_op
        baseline = (mode, "off", precision, shapes)
        arms += ([] if baseline in arms else [baseline]) + [(mode, op, precision, shapes) for op in OPS]
    if not cuda:
        arms = [arm for arm in arms if arm[1] == "off" and arm[2] != "tf32"]
    return arms


def make_batches(model_name: str, args, device: torch.device, shapes: str) -> list[dict]:
    """``--batches`` batches whose longest utterance steps over ``--lengths``; with ``buckets`` each
    batch's T padded up to its bucket (lengths unchanged: the model masks the padding)."""
    architecture, _ = parse_model(model_name)
    low, high = args.lengths
    longest = [round(low + (high - low) * i / max(1, args.batches - 1)) for i in range(args.batches)]
    batches = [
        synthetic_batch(args.batch_frames, t, device, seed=i, architecture=architecture)
        for i, t in enumerate(longest)
    ]
    if shapes == "buckets":
        buckets = TimeBuckets.geometric(max(int(b["features"].shape[1]) for b in batches), args.buckets)
        for batch in batches:
            frames = int(batch["features"].shape[1])
            batch["features"] = F.pad(batch["features"], (0, 0, 0, buckets.padded_length(frames) - frames))
    return batches


def largest_fitting(fits: Callable[[int], bool], start: int, limit: int, bisections: int = 4) -> int:
    """The largest size in [start, limit] for which ``fits`` is true, by doubling from ``start`` and then
    ``bisections`` halvings of the gap; 0 when ``start`` itself does not fit."""
    if not fits(start):
        return 0
    good, bad = start, None
    while bad is None and good < limit:
        trial = min(2 * good, limit)
        if fits(trial):
            good = trial
        else:
            bad = trial
    for _ in range(bisections if bad is not None else 0):
        middle = (good + bad) // 2
        if middle in (good, bad):
            break
        good, bad = (middle, bad) if fits(middle) else (good, middle)
    return good


class Arm:
    """One model under one arm: its compiled (or eager) step on the arm's batches."""

    def __init__(self, model_name: str, arm: tuple[str, str, str, str], args, device: torch.device) -> None:
        self.model_name, self.arm, self.device = model_name, arm, device
        self.mode, kernels, self.precision, self.shapes = arm
        self.marks = "buckets" if self.shapes == "buckets" else "auto"  # training.compile's shape modes
        self.kernels = kernel_choice(kernels)  # use_kernels' (choice, only)
        torch._dynamo.reset()
        torch.manual_seed(0)
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = self.precision == "tf32"
        architecture, size = parse_model(model_name)
        self.model = build_model(
            architecture,
            size,
            input_dim=default_input_dim(architecture),
            vocab_size=VOCAB_SIZE,
            dropout=0.1,
            **args.model_options,
        ).to(device)
        # the engine's AdamW: fused (one kernel for the update), weight decay off biases and norms
        self.optimizer = build_optimizer(
            "adamw", self.model, lr=1e-4, weight_decay=OptimConfig().weight_decay
        )
        self.runner = self.model
        if self.mode != "eager":  # compile: the whole model; layers: each repeated layer (regional)
            scope = "model" if self.mode == "compile" else "layers"
            self.runner = compile_model(
                self.model,
                backend=args.backend,
                mode=args.compile_mode,
                scope=scope,
                shapes=self.marks,
                options=args.compile_options,
            )
        self.batches = make_batches(model_name, args, device, self.shapes)

    def step(self, batch: dict) -> None:
        with use_kernels(*self.kernels):
            if self.mode != "eager":
                mark_batch_shapes(batch["features"], batch["lengths"], self.marks)
            train_step(self.runner, self.optimizer, batch, self.precision, self.device)

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def measure(arm: Arm, repeats: int) -> dict:
    """The first pass (compiles) and ``repeats`` timed passes over the arm's batches."""
    before = compile_counts()
    started = time.perf_counter()
    for batch in arm.batches:
        arm.step(batch)
    arm.synchronize()
    first_pass_sec = time.perf_counter() - started
    compiled = compile_counts() - before
    cuda = arm.device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats(arm.device)
    order = itertools.cycle(arm.batches)
    count = repeats * len(arm.batches)
    times = time_calls(lambda: arm.step(next(order)), arm.device, warmup=0, repeats=count)
    back_to_back = time_back_to_back(lambda: arm.step(next(order)), arm.device, count)
    timed = compile_counts() - before - compiled
    audio = repeats * sum(b["audio_sec"] for b in arm.batches)
    return {
        "model": arm.model_name,
        "arm": arm_name(arm.arm),
        "params_m": sum(p.numel() for p in arm.model.parameters()) / 1e6,
        "batch_audio_sec": audio / count,
        "padded_frames": [list(b["features"].shape[:2]) for b in arm.batches],
        "step_ms_median": statistics.median(times) * 1e3,
        "audio_sec_per_sec": audio / sum(times),
        # the same steps queued back to back, one wait at the end: the engine's way (a step reads nothing
        # back but inside torch's CTC); over audio_sec_per_sec, what a wait after every step costs
        "back_to_back_audio_sec_per_sec": audio / back_to_back,
        "peak_gib": torch.cuda.max_memory_allocated(arm.device) / 2**30 if cuda else math.nan,
        "first_pass_sec": first_pass_sec,
        **{k: v for k, v in compiled.to_dict().items() if k in ("compiles", "recompiles", "graph_breaks", "compile_sec")},
        "timed_recompiles": timed.compiles,
    }  # fmt: skip


def profile_table(arm: Arm, steps: int = 3, rows: int = 15) -> str:
    """torch.profiler's top ``rows`` operators/kernels by self device time (CPU time without CUDA)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if arm.device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for batch in arm.batches[:steps]:
            arm.step(batch)
        arm.synchronize()
    key = "self_cuda_time_total" if arm.device.type == "cuda" else "self_cpu_time_total"
    return prof.key_averages().table(sort_by=key, row_limit=rows, max_name_column_width=60)


def memory_cap(device: torch.device, gib: float) -> float:
    """Hold this process to ``gib`` GiB of the GPU's memory (``torch.cuda.set_per_process_memory_fraction``),
    so that a larger card answers for a smaller one; returns the fraction set (1.0: the card is no larger)."""
    fraction = min(1.0, gib * 2**30 / torch.cuda.get_device_properties(device).total_memory)
    torch.cuda.set_per_process_memory_fraction(fraction, device)
    return fraction


def largest_batch(arm: Arm, args) -> dict:
    """The most padded frames per batch the arm's step fits, at the longest length (its top bucket), in
    ``--largest-memory-gib`` of the GPU's memory."""
    frames = args.lengths[1]
    fraction = memory_cap(arm.device, args.largest_memory_gib)

    def fits(batch_frames: int) -> bool:
        batch = synthetic_batch(batch_frames, frames, arm.device, architecture=parse_model(arm.model_name)[0])
        try:
            arm.step(batch)
            arm.synchronize()
            return True
        except torch.OutOfMemoryError:
            arm.optimizer.zero_grad(set_to_none=True)
            return False
        finally:
            del batch
            torch.cuda.empty_cache()

    try:
        best = largest_fitting(fits, args.batch_frames, args.largest_limit)
        torch.cuda.reset_peak_memory_stats(arm.device)
        fits(best or args.batch_frames)
    finally:  # the later arms have the whole card again
        torch.cuda.set_per_process_memory_fraction(1.0, arm.device)
    return {
        "model": arm.model_name,
        "arm": arm_name(arm.arm),
        "largest_batch_frames": best,
        "utterances": best // frames,
        "peak_gib": torch.cuda.max_memory_allocated(arm.device) / 2**30,
        "memory_gib": args.largest_memory_gib,
        "memory_fraction": fraction,
    }


def engine_throughput(run_dir: str) -> dict:
    """The engine's own figures from a run's ``events.jsonl``: time to the first step and compile counts
    (the "compile" events), and audio-s/s of the "train" windows after the first epoch (steady: every
    bucket compiled) and over the whole run, with the share of those windows spent waiting for the loader."""
    from asr_pipeline.training.events import read_events

    compile_events = [e["values"] for e in read_events(run_dir, "compile")]
    windows = read_events(run_dir, "train")
    steady_windows = [e for e in windows if e["epoch"] >= 1] or windows[1:]
    steady = [e["values"]["audio_seconds_per_sec"] for e in steady_windows]
    # the share of the steady windows spent waiting for the loader (runs before it was logged: None)
    waits = [
        e["values"]["loader_wait_fraction"] for e in steady_windows if "loader_wait_fraction" in e["values"]
    ]
    data = read_events(run_dir, "data")[0]["values"]["batching"]
    kernels = read_events(run_dir, "kernels")
    last = compile_events[-1] if compile_events else {}
    return {
        "run_dir": run_dir,
        "first_step_sec": compile_events[0]["first_step_sec"] if compile_events else None,
        **{k: last.get(k) for k in ("compiles", "recompiles", "graph_breaks", "compile_sec")},
        "kernels": kernels[-1]["values"] if kernels else None,  # the ops whose Triton kernel ran
        "time_buckets": data.get("time_buckets"),
        "padding_fraction": data["epoch0"].get("padding_fraction"),
        "steady_audio_sec_per_sec": statistics.median(steady) if steady else None,
        "steady_loader_wait_fraction": statistics.median(waits) if waits else None,
        "train_windows": len(windows),
    }


def kernel_verdicts(rows: list[dict]) -> list[dict]:
    """Each row whose kernels are not "off", against the row of the same model, mode, precision and shapes with
    the kernels off: ``speedup`` = reference step ms / this step ms (> 1: the kernel(s) pay), and for a single
    op what ``auto`` runs for it today in the arm's mode ("kernel" or "reference": ``AUTO_KERNELS``)."""
    reference = {}
    for row in rows:
        mode, kernels, precision, shapes = row["arm"].split(":")
        if kernels == "off":
            reference[row["model"], mode, precision, shapes] = row["step_ms_median"]
    verdicts = []
    for row in rows:
        mode, kernels, precision, shapes = row["arm"].split(":")
        baseline = reference.get((row["model"], mode, precision, shapes))
        if kernels == "off" or baseline is None:
            continue
        auto = ""
        if kernels in OPS:
            auto = "kernel" if auto_runs_kernel(kernels, compiling=mode != "eager") else "reference"
        verdicts.append({
            "model": row["model"], "arm": row["arm"], "step_ms": row["step_ms_median"], "reference_ms": baseline,
            "speedup": baseline / row["step_ms_median"], "auto_today": auto,
        })  # fmt: skip
    return verdicts


def print_verdicts(verdicts: list[dict]) -> None:
    header = f"{'model':>15} {'arm':>40} | {'step ms':>8} {'ref ms':>8} {'speedup':>7} | auto today"
    print_table(header, (
        f"{v['model']:>15} {v['arm']:>40} | {v['step_ms']:8.1f} {v['reference_ms']:8.1f} {v['speedup']:7.2f}x | "
        f"{v['auto_today']}"
        for v in verdicts
    ))  # fmt: skip


def print_rows(rows: list[dict]) -> None:
    header = (
        f"{'model':>15} {'arm':>40} | {'step ms':>8} {'audio s/s':>9} {'b2b s/s':>9} {'MFU':>6} {'peak GiB':>8} | "
        f"{'first s':>7} {'compiles':>8} {'recomp':>6} {'breaks':>6} {'timed recomp':>12}"
    )
    print_table(header, (
        f"{r['model']:>15} {r['arm']:>40} | {r['step_ms_median']:8.1f} {r['audio_sec_per_sec']:9.0f} "
        f"{r['back_to_back_audio_sec_per_sec']:9.0f} "
        f"{r['mfu']:6.1%} {r['peak_gib']:8.2f} | {r['first_pass_sec']:7.1f} {r['compiles']:>8} "
        f"{r['recompiles']:>6} {r['graph_breaks']:>6} {r['timed_recompiles']:>12}"
        for r in rows
    ))  # fmt: skip


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["zipformer:m"], help="ARCHITECTURE:VARIANT")
    parser.add_argument(
        "--arms", nargs="+", type=parse_arm, help="default: every combination of the next four"
    )
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--kernels", nargs="+", choices=KERNELS, default=["off", "on", "auto"])
    parser.add_argument(
        "--per-op",
        type=parse_arm,
        help="also time this arm with each op's kernel alone (its KERNELS ignored)",
    )
    parser.add_argument("--precisions", nargs="+", choices=PRECISIONS, default=["f32", "bf16"])
    parser.add_argument("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES))
    parser.add_argument("--batch-frames", type=int, default=128_000, help="padded 10 ms frames per batch")
    parser.add_argument("--lengths", nargs=2, type=int, default=[400, 1600], help="longest utterance range")
    parser.add_argument("--batches", type=int, default=6, help="distinct batches (lengths) per pass")
    parser.add_argument("--buckets", type=int, default=4, help="bucket lengths for 'buckets' arms")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes over the batches")
    parser.add_argument("--backend", default="inductor", help="torch.compile backend")
    parser.add_argument("--compile-mode", default="default", help="inductor's mode (max-autotune, ...)")
    parser.add_argument(
        "--compile-options",
        type=compile_options,
        default={},
        metavar="KEY=VALUE,...",
        help="inductor config settings for every compiled arm, as the engine's --compile-options",
    )
    add_model_option_flag(parser)
    parser.add_argument("--deadline", type=float, help="seconds: arms not started by then are skipped")
    parser.add_argument("--profile", type=parse_arm, help="also profile this arm (first model)")
    parser.add_argument("--profile-out", default="profile.txt")
    parser.add_argument("--largest-batch", type=parse_arm, help="also search this arm's largest batch (CUDA)")
    parser.add_argument("--largest-limit", type=int, default=4_096_000, help="padded frames searched up to")
    parser.add_argument(
        "--largest-memory-gib",
        type=float,
        default=79.6,
        help="GPU memory the largest batch must fit in (default: an H100 80GB's 81,559 MiB, also on an H200)",
    )
    parser.add_argument(
        "--smoke", action="store_true", help="CPU, tiny model and batches: a check in seconds"
    )
    parser.add_argument("--json", help="write rows, rates, profile and largest batch here")
    parser.add_argument(
        "--engine-run", help="only print the engine's figures from this run dir's events.jsonl"
    )
    args = parser.parse_args(argv)
    args.model_options = dict(args.model_option)
    if args.engine_run:
        print(json.dumps(engine_throughput(args.engine_run)))
        return []
    cuda = torch.cuda.is_available() and not args.smoke
    device = torch.device("cuda" if cuda else "cpu")
    if args.smoke:
        args.models, args.batch_frames, args.lengths = ["zipformer:tiny"], 400, [80, 160]
        args.batches, args.buckets, args.repeats, args.backend = 2, 2, 1, "aot_eager"
        torch.set_num_threads(1)
    arms = arms_to_time(args, cuda)
    rates, memory = {}, math.nan
    if cuda:
        rates, memory = matmul_rates(device), memory_rate(device)
        print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}; matmul TFLOP/s: "
              + ", ".join(f"{k} {v / 1e12:.0f}" for k, v in rates.items())
              + f"; memory copy {memory / 1e12:.2f} TB/s", flush=True)  # fmt: skip
    started, rows, report = time.perf_counter(), [], {}
    for model_name in args.models:
        flops_per_audio_sec = None
        for arm in arms:
            if args.deadline and time.perf_counter() - started > args.deadline:
                print(
                    f"skipped {model_name} {arm_name(arm)}: past --deadline {args.deadline:.0f} s", flush=True
                )
                continue
            try:
                runner = Arm(model_name, arm, args, device)
                if flops_per_audio_sec is None:
                    batch = runner.batches[0]
                    flops_per_audio_sec = count_flops(runner.model, batch, device) / batch["audio_sec"]
                row = measure(runner, args.repeats)
            except torch.OutOfMemoryError as error:
                print(
                    f"{model_name} {arm_name(arm)}: out of memory ({str(error).splitlines()[0]})", flush=True
                )
                continue
            achieved = flops_per_audio_sec * row["audio_sec_per_sec"]
            row.update(
                gflop_per_audio_sec=flops_per_audio_sec / 1e9,
                mfu=achieved / rates[arm[2]] if cuda else math.nan,
            )
            rows.append(row)
            print(json.dumps(row), flush=True)
            if arm == args.profile and model_name == args.models[0]:
                report["profile"] = profile_table(runner)
                with open(args.profile_out, "w") as handle:
                    handle.write(report["profile"])
            if cuda and arm == args.largest_batch and model_name == args.models[0]:
                report["largest_batch"] = largest_batch(runner, args)
                print(json.dumps(report["largest_batch"]), flush=True)
            del runner
            if cuda:
                torch.cuda.empty_cache()
    verdicts = kernel_verdicts(rows)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(
                {
                    "rates_tflops": {k: v / 1e12 for k, v in rates.items()},
                    "memory_tbs": memory / 1e12,
                    "compile_options": args.compile_options,
                    "model_options": args.model_options,
                    "rows": rows,
                    "kernel_verdicts": verdicts,
                    **report,
                },
                handle,
                indent=1,
            )
    print()
    print_rows(rows)
    if verdicts:
        print()
        print_verdicts(verdicts)
    return rows


if __name__ == "__main__":
    main()
