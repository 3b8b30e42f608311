"""W2V-BERT activation checkpointing: peak memory and time of one forward + backward, with and without.

A 12-layer model of the demo width (d_model 160, 4 heads, FFN 640, kernel 15) on 1,000 frames (20 s at
20 ms), batch 2. Checkpointing keeps only each conformer layer's input for backward and recomputes the
rest, so the activation peak should fall to about one layer's worth plus the 12 saved inputs, for roughly
one extra forward of time.

Peak memory is above what was allocated before the step (parameters and inputs not counted; gradients
are). On CUDA: ``torch.cuda.max_memory_allocated``. On the CPU: the torch profiler with
``profile_memory=True``, peak = the maximum of the running sum of its allocation and free events in time
order. Time is the median of a few unprofiled steps.

    .venv/bin/python benchmarks/bench_w2v_activation_checkpointing.py        # or: make bench

Measured (torch 2.11):
    2-core CPU dev box   peak 1094.0 -> 192.5 MiB (0.18x), time 1.98 -> 2.02 s (1.02x; 0.89x in a busier
                         run: the recomputation is paid for by a working set that no longer page-faults
                         a fresh GB of activations every step)
    H100 (CUDA, fp32)    peak 1111.6 -> 132.1 MiB (0.12x), time 0.05 -> 0.10 s (1.93x: at this width the
                         step is bound by kernel launches, which the recomputed forward doubles)
"""

from __future__ import annotations

import statistics
import time
import warnings

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from asr_pipeline.models.w2v_bert import W2VBertCTC, w2v_bert_demo

NUM_LAYERS, FRAMES, BATCH, VOCAB, REPEATS = 12, 1000, 2, 256, 3
warnings.filterwarnings("ignore", message="Warning: Profiler clears events")  # one profile, nothing lost


def step(model: W2VBertCTC, features: torch.Tensor, lengths: torch.Tensor, targets: torch.Tensor) -> None:
    log_probs, out_lengths = model(features, lengths)
    target_lengths = torch.full((features.size(0),), targets.size(1))
    F.ctc_loss(log_probs.transpose(0, 1), targets, out_lengths, target_lengths).backward()
    model.zero_grad(set_to_none=True)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def seconds(model, device, *batch) -> float:
    step(model, *batch)  # warm-up: allocator caching, first-touch page faults
    times = []
    for _ in range(REPEATS):
        synchronize(device)
        start = time.perf_counter()
        step(model, *batch)
        synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def peak_mib(model, device, *batch) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        step(model, *batch)
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - before) / 2**20
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiler:
        step(model, *batch)
    # One "[memory]" record per allocation (+bytes) and free (-bytes), in the profiler's raw results.
    records = [event for event in profiler.profiler.kineto_results.events() if event.name() == "[memory]"]
    running = peak = 0
    for record in sorted(records, key=lambda event: event.start_ns()):
        running += record.nbytes()
        peak = max(peak, running)
    return peak / 2**20


def main() -> None:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    features = torch.randn(BATCH, FRAMES, 160, device=device)
    lengths = torch.full((BATCH,), FRAMES, device=device)
    targets = torch.randint(1, VOCAB, (BATCH, 200), device=device)
    print(
        f"W2V-BERT, {NUM_LAYERS} layers of d_model 160, {BATCH} x {FRAMES} frames, forward + backward on {device}"
    )
    results = {}
    for checkpointed in (False, True):
        started = time.perf_counter()
        torch.manual_seed(0)
        model = w2v_bert_demo(
            num_layers=NUM_LAYERS, vocab_size=VOCAB, dropout=0.0, activation_checkpointing=checkpointed
        )
        model = model.to(device).train()
        batch = (features, lengths, targets)
        results[checkpointed] = (peak_mib(model, device, *batch), seconds(model, device, *batch))
        print(f"  checkpointing={checkpointed}: {time.perf_counter() - started:.0f} s", flush=True)
    (plain_mib, plain_s), (ckpt_mib, ckpt_s) = results[False], results[True]
    print(f"{'':24}{'peak MiB':>10}{'time s':>10}")
    print(f"{'no checkpointing':24}{plain_mib:10.1f}{plain_s:10.2f}")
    print(f"{'activation checkpointing':24}{ckpt_mib:10.1f}{ckpt_s:10.2f}")
    print(f"{'ratio (ckpt / plain)':24}{ckpt_mib / plain_mib:10.2f}{ckpt_s / plain_s:10.2f}")


if __name__ == "__main__":
    main()
