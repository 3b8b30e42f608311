"""What the training-step benchmarks share (``bench_training_throughput.py``, ``bench_gpu_step.py``,
``bench_compile_training.py``, ``bench_kernel_training.py``; not a benchmark itself): the step as
``training.loop`` takes it, a synthetic batch, FLOP counting, the device's matmul ceiling, step timers, the
compile counters and the printed table.

One step = forward (bf16 autocast for ``"bf16"``) + float32 CTC loss over the batch's target tokens + backward
+ gradient-norm clip at ``train.optim.gradient_clip_norm``'s default + the optimizer's step.

The scripts import it as a top-level module: the folder of the script that runs is ``sys.path[0]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time
from collections.abc import Callable, Iterable

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from asr_kernels import OPS
from asr_pipeline.models.registry import default_input_dim, frontend_of
from asr_pipeline.training.config import OptimConfig
from asr_pipeline.training.config.model import parse_model_option
from asr_pipeline.training.config.run import inductor_options

FRAME_SEC = {"fbank": 0.01, "w2v-bert": 0.02}  # audio per input frame: w2v-bert stacks two 10 ms frames
TOKENS_PER_SEC = 12.5  # ~1 target per 8 fbank frames, whatever the frame rate
VOCAB_SIZE = 257  # 256 pieces + blank
CLIP_NORM = OptimConfig().gradient_clip_norm  # 5.0, the engine's default
PRECISIONS = {"f32": (torch.float32, False), "tf32": (torch.float32, True), "bf16": (torch.bfloat16, False)}
# An arm's kernels: on = every op's Triton kernel, off = every reference, auto = asr_kernels.AUTO_KERNELS (a
# run's default), an asr_kernels.OPS name = that op's kernel alone.
KERNEL_ARMS = ("on", "off", "auto", *OPS)


def kernel_choice(kernels: str) -> tuple[str, tuple[str, ...] | None]:
    """An arm's kernels (``KERNEL_ARMS``) as ``asr_kernels.use_kernels``' (choice, only)."""
    named = {"on": ("triton", None), "off": ("reference", None), "auto": ("auto", None)}
    return named.get(kernels, ("triton", (kernels,)))


# --- the batch and the step ---------------------------------------------------------------------------------
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
    """The CTC loss summed over the batch and divided by its target tokens (float32 whatever the forward)."""
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
    return losses.sum() / batch["target_lengths"].sum().clamp(min=1)


def train_step(model, optimizer, batch: dict, precision: str, device: torch.device) -> torch.Tensor:
    """One step of ``model`` (or its compiled wrapper); returns the loss it stepped on, detached (reading its
    value synchronizes with the device: the caller decides whether to)."""
    loss = loss_of(model, batch, precision, device)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP_NORM)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


def count_flops(model, batch: dict, device: torch.device) -> int:
    """FLOPs of one float32 forward + backward (matrix products and convolutions only: a lower bound)."""
    with FlopCounterMode(display=False) as counter:
        loss_of(model, batch, "f32", device).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def compile_options(text: str) -> dict[str, object]:
    """A ``--compile-options`` argument: ``run.compile_options``' parser (``inductor_options``), its error as
    argparse's."""
    try:
        return inductor_options(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_model_option_flag(parser: argparse.ArgumentParser) -> None:
    """``--model-option NAME=VALUE`` (repeatable), as train's: a model config field over every model's
    variant (``dict(args.model_option)``), parsed as train parses it (``parse_model_option``), its error as argparse's."""

    def model_option(text: str) -> tuple[str, object]:
        try:
            return parse_model_option(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    parser.add_argument(
        "--model-option",
        type=model_option,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a model config field for every model, as train's --model-option (relative_key_attention=flex)",
    )


# --- the device's ceiling and the timers ------------------------------------------------------------------
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


def matmul_rates(device: torch.device) -> dict[str, float]:
    """``matmul_rate`` of every precision (f32, tf32, bf16): the denominators of MFU."""
    return {name: matmul_rate(dtype, tf32, device) for name, (dtype, tf32) in PRECISIONS.items()}


def memory_rate(device: torch.device, gib: int = 2) -> float:
    """Measured device-memory bytes/s: a ``gib`` GiB copy reads and writes its bytes once (median of 10 after
    warm-up). The floor under a step's time is the bytes its kernels move (``bench_compiled_bytes.py``) over it."""
    source = torch.empty(gib * 2**30, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    times = time_cuda(lambda: target.copy_(source), warmup=3, repeats=10)
    return 2 * source.numel() / statistics.median(times)


def time_cuda(fn: Callable[[], object], warmup: int, repeats: int) -> list[float]:
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


def time_cpu(fn: Callable[[], object], warmup: int, repeats: int) -> list[float]:
    """Seconds per call, measured with ``time.perf_counter``."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return times


def time_back_to_back(fn: Callable[[], object], device: torch.device, calls: int) -> float:
    """Seconds for ``calls`` calls queued back to back, one wait for the device at the end: as a training
    loop that reads nothing back runs, the CPU queueing the next call while the device still runs this
    one. ``time_calls`` of one call running them all; timed call by call, each waits."""

    def all_calls() -> None:
        for _ in range(calls):
            fn()

    return time_calls(all_calls, device, warmup=0, repeats=1)[0]


def time_calls(fn: Callable[[], object], device: torch.device, warmup: int, repeats: int) -> list[float]:
    """Seconds per call on ``device``: ``time_cuda`` on a CUDA device, else ``time_cpu``."""
    return (time_cuda if device.type == "cuda" else time_cpu)(fn, warmup, repeats)


def cpu_seconds() -> float:
    """CPU time of this process and its reaped children (the C++ compiler runs, with compile_threads=1):
    what a step or a compile costs whatever else loads the machine."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def compiled_graphs() -> int:
    """Graphs ``torch.compile`` has made in this process so far."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


# --- the report ---------------------------------------------------------------------------------------------
def print_table(header: str, lines: Iterable[str]) -> None:
    """``header``, a rule as wide as it, then one line per row."""
    print(header)
    print("-" * len(header))
    for line in lines:
        print(line)
