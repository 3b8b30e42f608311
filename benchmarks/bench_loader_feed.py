"""Does the data loader keep the GPU fed? One training epoch over real feature shards, three ways, per
loader setting (worker processes, pinned memory):

- loader: the DataLoader alone (read, SpecAugment, collate, copy to the device), no model;
- compute: the Trainer's epoch over the same epoch's batches already on the device (no loading at all);
- fed: the Trainer's epoch reading from the loader, as training does.

``compute / fed`` is the share of the fed epoch's wall time the device would be busy if loading cost
nothing: 1.0 means loading is fully hidden behind compute; lower means the step waits for data. The
epoch is the Trainer's public ``train_epoch`` (forward, CTC, backward, clip, AdamW, its counters and
host syncs), so the figure includes the loop's own overheads.

    python benchmarks/bench_loader_feed.py --shards data/04_features/train --tokenizer data/03_tokenizer/tokenizer.model
    python benchmarks/bench_loader_feed.py ... --workers 0 2 4 8 --budget 16000 --precision bf16

Without the shards (``make demo`` writes them) it says so and exits; without CUDA it runs on the CPU.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)

import torch

from asr_pipeline.text.tokenizer import CTCTokenizer
from asr_pipeline.training.config import resolve_config
from asr_pipeline.training.distributed import DistributedContext
from asr_pipeline.training.events import EventLog
from asr_pipeline.training.loaders import build_data
from asr_pipeline.training.trainer import Trainer


def make_trainer(args, workers: int, pin: bool, device: torch.device, output_dir: Path) -> Trainer:
    config = resolve_config(
        {
            "data": {
                "train_manifests": [args.shards],
                "input_dim": 80,
                "adaptive_batch_budget": args.budget,
                "adaptive_batch_max_samples": args.max_samples,
                "num_workers": workers,
                "pin_memory": pin,
            },
            "model": {"architecture": "squeezeformer", "variant": args.variant},
            "optim": {"epochs": 1, "learning_rate": 1e-3, "lr_warmup_steps": 10},
            "run": {
                "output_dir": str(output_dir),
                "tokenizer": args.tokenizer,
                "backend": device.type,
                "precision": args.precision,
                "log_every": 1_000_000,
                "seed": 0,
            },
        }
    )
    ctx = DistributedContext(rank=0, local_rank=0, world_size=1, device=device)
    vocab_size = CTCTokenizer.from_file(args.tokenizer).vocab_size
    events = EventLog(output_dir / "events.jsonl", enabled=False, append=False)
    return Trainer(config, ctx, build_data(config, ctx), vocab_size, events)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def loader_epoch(trainer: Trainer, device: torch.device) -> tuple[float, list, float]:
    """Seconds for one pass of the loader with the copy to the device; the batches; their audio seconds."""
    trainer.sampler.set_epoch(0)
    started = time.perf_counter()
    batches = [batch.to(device, non_blocking=True) for batch in trainer.data.train_loader]
    synchronize(device)
    audio_sec = sum(float(batch.duration_ms.sum()) for batch in batches) / 1000
    return time.perf_counter() - started, batches, audio_sec


def timed_epoch(trainer: Trainer, device: torch.device, epoch: int) -> float:
    synchronize(device)
    started = time.perf_counter()
    trainer.train_epoch(epoch)
    synchronize(device)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", default="data/04_features/train")
    parser.add_argument("--tokenizer", default="data/03_tokenizer/tokenizer.model")
    parser.add_argument("--variant", default="demo")
    parser.add_argument("--precision", default="bf16", choices=["f32", "bf16", "f16"])
    parser.add_argument("--budget", type=int, default=16_000, help="padded frames per batch")
    parser.add_argument("--max-samples", type=int, default=64)
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2, 4, 8])
    args = parser.parse_args()
    if not Path(args.shards).exists() or not Path(args.tokenizer).exists():
        print(f"no shards at {args.shards} or tokenizer at {args.tokenizer}: run `make demo` first, or pass "
              "--shards/--tokenizer")  # fmt: skip
        return
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    if not cuda:
        args.workers, args.precision = args.workers[:2], "f32"
        print("note: no CUDA device; the same measurement on the CPU (pinned memory off)")
    else:
        print(
            f"device: {torch.cuda.get_device_name()}, {os.cpu_count()} CPU cores, torch {torch.__version__}"
        )
    header = (
        f"{'workers':>7} {'pin':>5} | {'loader s':>8} {'batches/s':>9} {'audio s/s':>9} | {'compute s':>9} "
        f"{'fed s':>7} | {'busy':>5} {'fed audio s/s':>13}"
    )
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for workers in args.workers:
            for pin in [False, True] if cuda else [False]:
                trainer = make_trainer(args, workers, pin, device, Path(tmp) / f"w{workers}{pin}")
                loader_sec, batches, audio_sec = loader_epoch(trainer, device)
                timed_epoch(trainer, device, 0)  # warm-up: allocator, autotuning, worker start
                fed_sec = timed_epoch(trainer, device, 0)
                trainer.data.train_loader = batches  # the same batches, already on the device
                compute_sec = timed_epoch(trainer, device, 0)
                rows.append(
                    f"{workers:>7} {pin!s:>5} | {loader_sec:8.2f} {len(batches) / loader_sec:9.1f} "
                    f"{audio_sec / loader_sec:9.0f} | {compute_sec:9.2f} {fed_sec:7.2f} | "
                    f"{compute_sec / fed_sec:5.0%} {audio_sec / fed_sec:13.0f}"
                )
                print(rows[-1], flush=True)
                del trainer, batches
    print(f"{args.variant} {args.precision}, budget {args.budget} padded frames, one epoch of {args.shards}")
    print(header)
    print("-" * len(header))
    print("\n".join(rows))


if __name__ == "__main__":
    sys.exit(main())
