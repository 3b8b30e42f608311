"""How fast the training loader delivers batches (issue 36): audio-seconds per second out of
``training.loaders.build_data``'s DataLoader, by read path and worker count, on LibriSpeech-shaped shards.

Issue 36's target is 15,000 audio-s/s inside the training engine, the loader feeding it: the loader must
deliver that, with room, on the GPU machine's CPUs. Each arm builds the loader as training does, with the
GPU script's engine settings (``gpu_issue36.sh``: padded-frames budget 128,000, at most 256 utterances,
time buckets 1280 and 1600, utterances up to 16 s, SpecAugment's defaults; shard windows of 2, see
``ENGINE_DATA``), and runs two epochs of it with nothing else: the first with the worker processes' start,
the second the steady one. Per batch: the sampler's
indices, the shard reads, SpecAugment, the collate to the bucket length; no copy to a device.

Arms, ``READ:WORKERS[:shared]``:
- ``batched``: the DataLoader reads a batch at a time (``ShardDataset.__getitems__``), as training does;
- ``per-item``: the same loader made to read item by item (``dataset[i]`` per index: what the DataLoader
  does for a dataset without ``__getitems__``), the cost per item the batched read saves;
- ``:shared``: the sampler plans the epoch for one reader (``loader_workers`` 0), so every worker gets
  batches of every shard of a window, as before the sampler dealt shards out to workers
  (``data.sampler``, readers).

Every arm counts the shards decoded in all its processes: a process decodes every shard its batches draw
from, so with ``:shared`` N workers decode each shard up to N times an epoch.

The corpus (``bench_librispeech_scale.ensure_corpus``: LibriSpeech-960's duration distribution, 80 float16
bins, a repeating ramp that decompresses faster than real features) is written once into ``--workdir``.
Arms run in turn, ``--repeats`` times (A B C A B C ...); the table gives each arm's median.

    nice -n 10 .venv/bin/python benchmarks/bench_loader_rate.py
    nice -n 10 .venv/bin/python benchmarks/bench_loader_rate.py --arms batched:0 batched:4 --shards 24
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from bench_librispeech_scale import ensure_corpus
from torch.utils.data import DataLoader, Dataset

from asr_pipeline.data.dataset import ShardDataset
from asr_pipeline.training.config import resolve_config
from asr_pipeline.training.distributed import DistributedContext
from asr_pipeline.training.loaders import build_data

READS = ("batched", "per-item")
# gpu_issue36.sh's engine run (its TRAIN flags), as training's data settings
ENGINE_DATA = {
    "input_dim": 80,
    "adaptive_batch_budget": 128_000,
    "adaptive_batch_max_samples": 256,
    "max_audio_duration_sec": 16,
    "pad_to_buckets": [1280, 1600],
    # Windows of 2 shards (training's default is 8): with --shards 12, an epoch reads each shard once and
    # the next reads it again, as an epoch of a corpus of hundreds of shards does through windows of 8.
    "shuffle_window_shards": 2,
}


def parse_arm(text: str) -> tuple[str, int, bool]:
    read, _, rest = text.partition(":")
    workers, _, plan = rest.partition(":")
    if read not in READS or not workers.isdigit() or plan not in ("", "shared"):
        raise argparse.ArgumentTypeError(
            f"an arm is READ:WORKERS[:shared] with READ one of {READS}, got {text!r}"
        )
    return read, int(workers), plan == "shared"


def arm_name(read: str, workers: int, shared: bool) -> str:
    return f"{read}:{workers}" + (":shared" if shared else "")


class PerItem(Dataset):
    """``dataset`` without ``__getitems__``: the DataLoader then reads it item by item."""

    def __init__(self, dataset: ShardDataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, key):
        return self.dataset[key]


class CountedOpens:
    """Counts ``ShardDataset._open`` calls in this process and in the loader workers it forks."""

    def __init__(self) -> None:
        self.count = multiprocessing.get_context("fork").Value("i", 0)
        self._open = ShardDataset._open

    def __enter__(self) -> CountedOpens:
        original, count = self._open, self.count

        def counted(dataset: ShardDataset, shard: int):
            with count.get_lock():
                count.value += 1
            return original(dataset, shard)

        ShardDataset._open = counted
        return self

    def __exit__(self, *exc) -> None:
        ShardDataset._open = self._open


def loader_for(corpus: Path, read: str, workers: int, shared: bool, output_dir: Path) -> DataLoader:
    config = resolve_config(
        {
            "data": {"train_manifests": [str(corpus)], "num_workers": workers, **ENGINE_DATA},
            "model": {"architecture": "zipformer", "variant": "m", "vocab_size": 500},
            "run": {"output_dir": str(output_dir), "backend": "cpu", "seed": 0},
        }
    )
    ctx = DistributedContext(rank=0, local_rank=0, world_size=1, device=torch.device("cpu"))
    loader = build_data(config, ctx).train_loader
    if shared:
        loader.batch_sampler.loader_workers = 0  # one reader: the plan every worker count had before
    if read == "batched":
        return loader
    extra = {"persistent_workers": True} if workers else {}
    return DataLoader(
        PerItem(loader.dataset),
        batch_sampler=loader.batch_sampler,
        collate_fn=loader.collate_fn,
        num_workers=workers,
        generator=loader.generator,
        **extra,
    )


def run_arm(corpus: Path, read: str, workers: int, shared: bool, epochs: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp, CountedOpens() as opens:
        loader = loader_for(corpus, read, workers, shared, Path(tmp))
        seconds, audio, batches = [], 0.0, 0
        for epoch in range(epochs):
            loader.batch_sampler.set_epoch(epoch)
            started = time.perf_counter()
            audio, batches = 0.0, 0
            for batch in loader:
                audio += float(batch.duration_ms.sum()) / 1000
                batches += 1
            seconds.append(time.perf_counter() - started)
        del loader  # persistent workers end here
        return {"seconds": seconds, "audio_sec": audio, "batches": batches, "opens": opens.count.value}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--arms",
        nargs="+",
        type=parse_arm,
        default=[parse_arm(arm) for arm in ("per-item:0", "batched:0", "batched:2:shared", "batched:2")],
        help="READ:WORKERS[:shared], READ one of " + ", ".join(READS),
    )
    parser.add_argument("--shards", type=int, default=12, help="shards in the corpus (a window holds 8)")
    parser.add_argument("--rows", type=int, default=256, help="utterances per shard")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/asr_pipeline_bench_loader_rate"))
    args = parser.parse_args()
    if args.shards < 1 or args.rows < 1 or args.repeats < 1:
        parser.error("--shards, --rows and --repeats must be >= 1")
    paths = ensure_corpus(args.workdir, args.shards, args.rows, 80, 0)
    corpus = Path(paths[0]).parent
    if args.shards < len(list(corpus.glob("shard-*.parquet"))):
        corpus = args.workdir / f"first-{args.shards}"  # the first --shards of a larger corpus, linked
        corpus.mkdir(parents=True, exist_ok=True)
        for path in map(Path, paths):
            if not (corpus / path.name).exists():
                (corpus / path.name).symlink_to(path)
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
        f"Python {platform.python_version()}; {args.shards} shards x {args.rows} utterances in {corpus}",
        flush=True,
    )
    results: dict[tuple[str, int, bool], list[dict]] = {arm: [] for arm in args.arms}
    run_arm(corpus, *args.arms[0], epochs=1)  # warm-up, not counted: imports, caches, the page cache
    for repeat in range(args.repeats):
        for read, workers, shared in args.arms:
            result = run_arm(corpus, read, workers, shared, epochs=2)
            results[(read, workers, shared)].append(result)
            print(
                f"repeat {repeat + 1} {arm_name(read, workers, shared)}: epochs {result['seconds'][0]:.2f} s, "
                f"{result['seconds'][1]:.2f} s",
                flush=True,
            )
    header = (
        f"{'arm':>16} | {'batches':>7} {'audio s':>8} | {'first epoch s':>13} "
        f"{'steady epoch s':>14} {'audio-s/s':>9} {'ms/batch':>8} | {'shards decoded':>14}"
    )
    print("\n" + header + "\n" + "-" * len(header))
    for (read, workers, shared), runs in results.items():
        first = statistics.median(run["seconds"][0] for run in runs)
        steady = statistics.median(run["seconds"][1] for run in runs)
        audio, batches = runs[0]["audio_sec"], runs[0]["batches"]
        print(
            f"{arm_name(read, workers, shared):>16} | {batches:>7} {audio:>8.0f} | {first:>13.2f} {steady:>14.2f} "
            f"{audio / steady:>9.0f} {1000 * steady / batches:>8.1f} | {runs[0]['opens']:>14}"
        )
    print(
        f"(medians of {args.repeats}; shards decoded over both epochs, all processes; {args.shards} per epoch)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
