"""Batching modes on the demo corpus: padding, batches per epoch, and loader vs training throughput.

1. Plans one epoch (1 rank, epoch 0) of the demo training split in every batching mode, budgets set near the
   demo's ``padded-frames 4000 / max 24``, and prints per mode: batches per epoch, mean batch size, padding
   efficiency (real frames / padded frames of the (B, T, F) tensors) and the largest padded batch (what
   sets peak memory). Lengths come from the feature shards' length index (``data/04_features/train``);
   without shards, from the raw demo audio's headers (``data/01_raw/demo/train``); without either, a
   small corpus is synthesized with espeak-ng (``demo.corpus``).
2. Times the loaders in audio-seconds per second: feature shards (the fast path) and raw audio decoded and
   featurized on the fly (with waveform augmentation), in this process (``num_workers=0``).
3. Times forward + backward of the demo model on a typical padded-frames batch, which is what a training
   step consumes in audio-seconds per second; a loader slower than that starves training.

    .venv/bin/python benchmarks/bench_batching.py        # or: make bench
"""

from __future__ import annotations

import itertools
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from asr_pipeline.data.audio_dataset import (
    AudioDataset,
    EpochTaggedBatchSampler,
    build_audio_index,
    planned_frontend,
)
from asr_pipeline.data.collate import Batch, collate_batch
from asr_pipeline.data.dataset import ShardDataset
from asr_pipeline.data.length_index import build_length_index
from asr_pipeline.data.sampler import LengthBucketedBatchSampler
from asr_pipeline.features.augment import SpecAugment, WaveformAugment
from asr_pipeline.io.report import SkipReport
from asr_pipeline.io.shards import list_shards
from asr_pipeline.models.registry import build_model
from asr_pipeline.text.sentencepiece_training import SentencePieceOptions, train_sentencepiece
from asr_pipeline.text.tokenizer import CTCTokenizer

ROOT = Path(__file__).resolve().parents[1]
SHARDS = ROOT / "data" / "04_features" / "train"
RAW = ROOT / "data" / "01_raw" / "demo" / "train"
TOKENIZER = ROOT / "data" / "03_tokenizer" / "tokenizer.model"
DEMO_BUDGET, DEMO_MAX_SAMPLES, FEATURE_DIM = 4000, 24, 80
# (name, sampler options): budgets near the demo's padded-frames 4000, converted per unit (10 ms frames).
MODES: list[tuple[str, dict]] = [
    ("fixed 16, no bucketing", {}),  # a random permutation cut into 16s: the baseline
    ("fixed 16", {"batch_size": 16}),
    ("samples 16", {"unit": "samples", "budget": 16}),
    ("padded-frames 4000 (demo)", {"unit": "padded-frames", "budget": DEMO_BUDGET}),
    ("padded-frames 4000, desc", {"unit": "padded-frames", "budget": DEMO_BUDGET, "sort_descending": True}),
    ("frames 4000", {"unit": "frames", "budget": DEMO_BUDGET}),
    ("feature-values 320000", {"unit": "feature-values", "budget": DEMO_BUDGET * FEATURE_DIM}),
    ("duration-ms 40000", {"unit": "duration-ms", "budget": DEMO_BUDGET * 10}),
    ("padded-duration-ms 40000", {"unit": "padded-duration-ms", "budget": DEMO_BUDGET * 10}),
]
LOADER_BATCHES = {"shards": 40, "raw": 12}
TRAIN_STEPS = 3


def raw_folder(scratch: Path) -> Path:
    if RAW.is_dir():
        return RAW
    from asr_pipeline.demo.corpus import DemoCorpusParams, build_demo_corpus

    print("no demo audio in data/01_raw/demo: synthesizing 200 utterances with espeak-ng ...", flush=True)
    for relative, data in build_demo_corpus(
        DemoCorpusParams(train_size=200, dev_size=0, test_size=0)
    ).items():
        (scratch / relative).parent.mkdir(parents=True, exist_ok=True)
        (scratch / relative).write_bytes(data)
    return scratch / "train"


def tokenizer(folder: Path) -> CTCTokenizer:
    """The demo's tokenizer when the tokenizer stage has run, else one trained on the folder's transcripts."""
    if TOKENIZER.is_file():
        return CTCTokenizer.from_file(TOKENIZER)
    texts = [path.read_text().strip() for path in sorted(folder.glob("*.txt"))]
    return CTCTokenizer(train_sentencepiece(texts, SentencePieceOptions(vocab_size=48)))


def plan_table(frames: np.ndarray, durations: np.ndarray) -> None:
    print(f"\n{len(frames)} training examples, {durations.sum() / 3.6e6:.2f} h, 1 rank, epoch 0")
    header = f"{'mode':28s} {'batches':>8s} {'mean B':>7s} {'padding eff.':>13s} {'max padded':>11s} {'oversized':>10s}"
    print(header + "\n" + "-" * len(header))
    for name, options in MODES:
        if not options:
            order = np.random.default_rng(0).permutation(len(frames))
            batches = [order[i : i + 16].tolist() for i in range(0, len(order), 16)]
            oversized = 0
        else:
            sampler = LengthBucketedBatchSampler(
                frames,
                durations_ms=durations,
                feature_dim=FEATURE_DIM,
                max_samples=DEMO_MAX_SAMPLES if "budget" in options else None,
                **options,
            )
            batches, oversized = sampler.epoch_batches(0), sampler.plan_stats(0).oversized_batches
        padded = [len(b) * int(frames[b].max()) for b in batches]
        efficiency = int(frames.sum()) / sum(padded)
        print(
            f"{name:28s} {len(batches):8d} {len(frames) / len(batches):7.1f} {efficiency:13.3f} "
            f"{max(padded):11d} {oversized:10d}"
        )


def loader_throughput(dataset, sampler, batches: int, epoch_tagged: bool) -> tuple[float, Batch]:
    """Audio-seconds per second of a ``num_workers=0`` loader over ``batches`` batches, and the last batch."""
    batch_sampler = EpochTaggedBatchSampler(sampler) if epoch_tagged else sampler
    loader = DataLoader(dataset, batch_sampler=batch_sampler, collate_fn=collate_batch)
    audio_ms, started, batch = 0, time.perf_counter(), None
    for batch in itertools.islice(loader, batches):
        audio_ms += int(batch.duration_ms.sum())
    assert batch is not None
    return audio_ms / 1000 / (time.perf_counter() - started), batch


def typical_batch(dataset, sampler) -> Batch:
    """The batch of median padded size in the plan: what an average training step sees."""
    plan = sampler.epoch_batches(0)
    padded = [len(b) * int(dataset.num_frames[b].max()) for b in plan]
    median = plan[int(np.argsort(padded)[len(plan) // 2])]
    return collate_batch([dataset[i] for i in median])


def training_throughput(batch: Batch) -> float:
    """Audio-seconds per second of forward + backward of the demo model on ``batch`` (one warm-up step)."""
    model = build_model("squeezeformer", "demo", input_dim=FEATURE_DIM, vocab_size=49)
    targets = batch.targets.clamp(min=1, max=48)
    times = []
    for _ in range(TRAIN_STEPS + 1):
        started = time.perf_counter()
        log_probs, lengths = model(batch.features, batch.feature_lengths)  # (B, T', V), (B,)
        loss = F.ctc_loss(
            log_probs.transpose(0, 1), targets, lengths, batch.target_lengths, zero_infinity=True
        )
        loss.backward()
        model.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - started)
    return float(batch.duration_ms.sum()) / 1000 / float(np.median(times[1:]))


def main() -> int:
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as scratch:
        folder = raw_folder(Path(scratch))
        started = time.perf_counter()
        raw_index = build_audio_index([folder], planned_frontend("fbank"), tokenizer(folder), SkipReport())
        print(
            f"raw audio index (headers only, no decoding): {raw_index.num_rows} files in "
            f"{time.perf_counter() - started:.1f} s"
        )
        raw_set = AudioDataset(
            raw_index,
            planned_frontend("fbank"),
            waveform_augment=WaveformAugment(-6.0, 6.0, 0.001),
            spec_augment=SpecAugment(),
        )
        shards = list_shards(SHARDS) if SHARDS.is_dir() else []
        if shards:
            print(f"lengths from the feature shards' length index: {SHARDS}")
            shard_set = ShardDataset(build_length_index(shards), transform=SpecAugment())
            plan_table(shard_set.num_frames, shard_set.duration_ms)
        else:
            print(f"no feature shards in {SHARDS}: lengths from the raw audio headers ({folder})")
            plan_table(raw_set.num_frames, raw_set.duration_ms)
        print("\nthroughput, audio-seconds per second (1 process, this machine's CPU):")
        demo = {"budget": DEMO_BUDGET, "max_samples": DEMO_MAX_SAMPLES, "seed": 0}
        raw_sampler = LengthBucketedBatchSampler(raw_set.num_frames, **demo)
        raw_speed, _ = loader_throughput(raw_set, raw_sampler, LOADER_BATCHES["raw"], epoch_tagged=True)
        if shards:
            shard_sampler = LengthBucketedBatchSampler(shard_set.num_frames, **demo)
            shard_speed, _ = loader_throughput(shard_set, shard_sampler, LOADER_BATCHES["shards"], False)
            print(f"  loader, feature shards (SpecAugment)                    {shard_speed:8.1f}")
            batch = typical_batch(shard_set, shard_sampler)
        else:
            batch = typical_batch(raw_set, raw_sampler)
        print(f"  loader, raw audio on the fly (decode, gain+noise, fbank)  {raw_speed:8.1f}")
        train_speed = training_throughput(batch)
        print(
            f"  training step, demo model fwd+bwd (B={len(batch)}, T={batch.features.shape[1]})"
            f"{'':>8s}{train_speed:8.1f}"
        )
        print(
            f"\nloader / training: shards {shard_speed / train_speed:.1f}x, "
            if shards
            else "\nloader / training: ",
            f"raw {raw_speed / train_speed:.1f}x (>1: one loader process keeps up with one training process)",
            sep="",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
