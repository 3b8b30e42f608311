"""LibriSpeech-960-shaped loader scale (issue 18): length index, sampler planning and loader peak RSS by corpus size.

A synthetic corpus shaped like LibriSpeech's 960 h training set is written once as our feature shards
(``io.shards``: ``records_to_table`` / ``write_shard``, ``--shard-size`` rows per shard like the features stage)
and measured at each ``--sizes`` (default 10k, 100k, 280k utterances; smaller sizes are prefixes of the same
shard list, cut to exactly N utterances with training's ``data.max_train_samples``):

1. ``build_length_index`` time over the shards of that size;
2. sampler planning time per epoch: ``epoch_batches`` of the very sampler training builds;
3. peak RSS of the training loader iterating one whole epoch, built by ``training.loaders.build_data`` itself
   (``ShardDataset`` + ``LengthBucketedBatchSampler`` + ``collate_batch`` + ``DataLoader``, SpecAugment on) with
   ``DataConfig``'s defaults: padded-frames budget 20,000, at most 64 utterances per batch, ``num_workers`` 0,
   shard windows of 8 (``data.shuffle_window_shards``: the sampler shuffles shards, then the examples of 8 at a
   time, and the dataset keeps 9 open).

Every size runs in a fresh subprocess, so each has its own peak (``ru_maxrss`` never goes down within a
process); with ``--num-workers`` > 0 the workers' peaks (``VmHWM`` of each, read before they exit) are added.
The target: peak RSS flat, at most 1.2x from the smallest size to the largest. Per size it also prints
where the memory sits: the shard tables ``ShardDataset`` holds open (decompressed Arrow) and the rest, and the
peak after each phase (imports, index, ``build_data``, planning, the epoch). ``--shuffle-window-shards 0`` runs
the global shuffle training used before shard windows (every shard read stays open), for the before/after.

The corpus, honest where the code under test looks and cheap elsewhere:
- durations: gamma (shape 8) scaled to LibriSpeech-960's mean, 960 h / 281,241 utterances = 12.3 s, clipped
  to [1, 35] s (LibriSpeech's segmenter cut at 35 s); T = duration / 10 ms frames, as fbank produces;
- tokens U = 3 per second of audio and a transcript of 2.7 words per second, so they scale with duration;
- features: the real T, but a narrow F (``--feature-dim``, default 8) stored as float16. F only scales the
  feature bytes (disk, decompression, the per-item copy and collate); the index, sampler and collate see real
  lengths. At F = 8 the 280k corpus is 5.5 GB of float16 features decompressed (80 fbank bins: 55 GB) and
  43 MB of zstd on disk (writing it once takes ~90 s); memory that grows with the features grows 10x faster
  at F = 80.
  The values are a 16-frame repeating ramp: deterministic, compress and write fast; zstd decompresses them
  faster than real features, so read times here are a lower bound.

The corpus lives in ``--workdir`` (default ``/tmp/asr_pipeline_bench_librispeech_scale``), one folder per
(F, shard size, seed). Shard ``i`` is a pure function of (seed, i), so a larger size only appends shards;
``corpus.json`` records how many shards are complete and is written last. Run it niced on a shared machine:

    nice -n 10 .venv/bin/python benchmarks/bench_librispeech_scale.py                # 10k, 100k, 280k
    nice -n 10 .venv/bin/python benchmarks/bench_librispeech_scale.py --quick        # smoke: 1k, 3k, 10k
    nice -n 10 .venv/bin/python benchmarks/bench_librispeech_scale.py --sizes 10000 100000 --num-workers 2
    nice -n 10 .venv/bin/python benchmarks/bench_librispeech_scale.py --sizes 5000 --max-open-shards 2
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

SIZES = (10_000, 100_000, 280_000)
QUICK_SIZES = (1_000, 3_000, 10_000)
MEAN_DURATION_S = 960 * 3600 / 281_241  # LibriSpeech-960: 12.29 s per utterance
GAMMA_SHAPE = 8.0  # std = mean / sqrt(shape) = 4.3 s; the clip to [1, 35] s changes the mean by < 0.1 %
MIN_DURATION_S, MAX_DURATION_S = 1.0, 35.0
FRAME_MS = 10
TOKENS_PER_SECOND, WORDS_PER_SECOND = 3.0, 2.7
WORDS = "the of and to a in that he was it his i with had as for you her she but not be at on is".split()  # noqa: SIM905
CORPUS_VERSION = 1  # bump when the generator changes: a folder of another version is never reused
PLANNED_EPOCHS = 3  # epochs planned for the planning time (median)


# --- the corpus ------------------------------------------------------------------------------------------
def shard_records(shard_index: int, shard_size: int, feature_dim: int, seed: int) -> list[dict]:
    """The ``shard_size`` records of shard ``shard_index``: a pure function of its arguments."""
    rng = np.random.default_rng([seed, shard_index])
    durations_s = np.clip(
        rng.gamma(GAMMA_SHAPE, MEAN_DURATION_S / GAMMA_SHAPE, shard_size), MIN_DURATION_S, MAX_DURATION_S
    )
    durations_ms = (np.round(durations_s * 1000 / FRAME_MS) * FRAME_MS).astype(np.int64)
    pattern = _feature_pattern(feature_dim)
    records = []
    for offset, duration_ms in enumerate(durations_ms.tolist()):
        utterance = shard_index * shard_size + offset
        frames = duration_ms // FRAME_MS  # T
        num_tokens = max(1, round(duration_ms / 1000 * TOKENS_PER_SECOND))  # U
        num_words = max(1, round(duration_ms / 1000 * WORDS_PER_SECOND))
        records.append(
            {
                # LibriSpeech-style speaker-chapter-utterance ids
                "id": f"{1000 + utterance // 2000}-{10000 + utterance // 100}-{utterance % 100:04d}",
                "features": pattern[:frames],  # (T, F) view, never copied here
                "tokens": [(utterance + k) % 499 + 1 for k in range(num_tokens)],
                "duration_ms": duration_ms,
                "text": " ".join(WORDS[(utterance + k * 7) % len(WORDS)] for k in range(num_words)),
            }
        )
    return records


def _feature_pattern(feature_dim: int) -> np.ndarray:
    frames = int(MAX_DURATION_S * 1000 / FRAME_MS)
    ramp = (np.arange(frames)[:, None] + np.arange(feature_dim)[None, :]) % 16
    return (ramp / 4 - 2).astype(np.float16)  # (T_max, F), values in [-2, 1.75]


def ensure_corpus(workdir: Path, num_shards: int, shard_size: int, feature_dim: int, seed: int) -> list[str]:
    """Paths of the first ``num_shards`` shards, writing those the folder does not hold yet."""
    from asr_pipeline.io.shards import records_to_table, shard_name, write_shard

    folder = workdir / f"corpus-v{CORPUS_VERSION}-F{feature_dim}-rows{shard_size}-seed{seed}"
    manifest = folder / "corpus.json"
    done = json.loads(manifest.read_text())["complete_shards"] if manifest.is_file() else 0
    if done < num_shards:
        folder.mkdir(parents=True, exist_ok=True)
        for index in tqdm(range(done, num_shards), desc=f"writing shards to {folder}", unit="shard"):
            table = records_to_table(shard_records(index, shard_size, feature_dim, seed), "float16")
            write_shard(table, folder / shard_name(index))
        tmp = manifest.with_name(manifest.name + ".tmp")
        tmp.write_text(json.dumps({"complete_shards": num_shards, "shard_size": shard_size}) + "\n")
        os.replace(tmp, manifest)
    return [str(folder / shard_name(index)) for index in range(num_shards)]


# --- one size, in a fresh process ---------------------------------------------------------------------------
def _rss_mib(field: str = "VmRSS", pid: int | str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _worker_peaks_mib() -> list[float]:
    """``VmHWM`` of this process's live children (the DataLoader workers)."""
    peaks = []
    me = str(os.getpid())
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if fields[1] == me:  # field 4 of /proc/PID/stat: the parent pid
                peaks.append(_rss_mib("VmHWM", stat.parent.name))
        except (OSError, IndexError):
            continue
    return peaks


def measure(options: dict) -> dict:
    """Child process: index, plan and iterate one epoch at one size; return the numbers."""
    import pyarrow as pa
    import torch

    from asr_pipeline.data.length_index import build_length_index
    from asr_pipeline.training.config import resolve_config
    from asr_pipeline.training.distributed import DistributedContext
    from asr_pipeline.training.loaders import build_data

    size, paths = options["size"], options["paths"]
    torch.set_num_threads(1)  # the loader's work is per item; a niced 2-core machine has no more to give
    phases = {"imports": _peak_mib()}

    build_length_index(paths[:1])  # warm-up: Arrow's compute functions load on first use (~0.3 s)
    started = time.perf_counter()
    index = build_length_index(paths)
    index_seconds = time.perf_counter() - started
    index_rows, index_mib = index.num_rows, index.nbytes / 2**20
    del index
    phases["length index"] = _peak_mib()

    data = {"train_manifests": paths, "input_dim": options["feature_dim"], "max_train_samples": size}
    if options["num_workers"] is not None:
        data["num_workers"] = options["num_workers"]
    if options["shuffle_window_shards"] is not None:
        data["shuffle_window_shards"] = options["shuffle_window_shards"]
    config = resolve_config({"data": data})
    started = time.perf_counter()
    bundle = build_data(config, DistributedContext(0, 0, 1, torch.device("cpu")))
    build_seconds = time.perf_counter() - started
    phases["build_data"] = _peak_mib()
    loader, sampler = bundle.train_loader, bundle.train_sampler
    dataset = loader.dataset

    plan_seconds = []
    for epoch in range(1, PLANNED_EPOCHS + 1):
        sampler.set_epoch(epoch)
        started = time.perf_counter()
        sampler.epoch_batches()
        plan_seconds.append(time.perf_counter() - started)
    sampler.set_epoch(0)
    phases["planning"] = _peak_mib()

    opens = {"count": 0, "seconds": 0.0}
    open_shard = dataset._open  # timed to tell shard reads from per-item work (num_workers 0 only)

    def timed_open(shard: int) -> pa.Table:
        started = time.perf_counter()
        table = open_shard(shard)
        opens["count"] += 1
        opens["seconds"] += time.perf_counter() - started
        return table

    dataset._open = timed_open
    batches = examples = real_frames = padded_frames = 0
    started = time.perf_counter()
    iterator = iter(loader)
    for batch in tqdm(iterator, total=len(sampler), desc=f"epoch over {size:,} utterances", unit="batch"):
        batches += 1
        examples += len(batch)
        real_frames += int(batch.feature_lengths.sum())
        padded_frames += batch.features.shape[0] * batch.features.shape[1]
    epoch_seconds = time.perf_counter() - started
    workers = _worker_peaks_mib()  # before the persistent workers exit with the iterator
    del iterator
    phases["epoch"] = _peak_mib()
    open_tables = list(dataset._tables.values())
    return {
        "size": size,
        "shards": len(dataset.shard_paths),
        "utterances": len(dataset),
        "audio_hours": float(dataset.duration_ms.sum()) / 3.6e6,
        "index_rows": index_rows,
        "index_mib": index_mib,
        "index_seconds": index_seconds,
        "build_data_seconds": build_seconds,
        "plan_seconds": statistics.median(plan_seconds),
        "batches": batches,
        "examples": examples,
        "padding_efficiency": real_frames / padded_frames,
        "epoch_seconds": epoch_seconds,
        "shard_opens": opens["count"] if loader.num_workers == 0 else None,  # workers count their own
        "shard_open_seconds": opens["seconds"] if loader.num_workers == 0 else None,
        "open_tables": len(open_tables),
        "open_tables_mib": sum(table.nbytes for table in open_tables) / 2**20,
        "arrow_pool": pa.default_memory_pool().backend_name,
        "arrow_allocated_mib": pa.total_allocated_bytes() / 2**20,
        "arrow_pool_peak_mib": pa.default_memory_pool().max_memory() / 2**20,
        "rss_end_mib": _rss_mib(),
        "phases_peak_mib": phases,
        "peak_mib": phases["epoch"],
        "workers_peak_mib": workers,
    }


# --- the table ------------------------------------------------------------------------------------------------
def run_size(size: int, paths: list[str], args: argparse.Namespace) -> dict:
    options = {
        "size": size,
        "paths": paths,
        "feature_dim": args.feature_dim,
        "num_workers": args.num_workers,
        "shuffle_window_shards": args.shuffle_window_shards,
    }
    # options on stdin (hundreds of shard paths); stderr (tqdm) goes to the terminal; stdout's last line is
    # the result
    child = subprocess.run(
        [sys.executable, __file__, "--measure"], input=json.dumps(options), stdout=subprocess.PIPE, text=True
    )
    if child.returncode != 0:
        raise SystemExit(
            f"the measurement of {size:,} utterances failed (exit {child.returncode}); see above"
        )
    return json.loads(child.stdout.strip().splitlines()[-1])


def rest_mib(result: dict) -> float:
    """Peak RSS of the measuring process not explained by the imports and the shard tables it holds open."""
    return result["peak_mib"] - result["phases_peak_mib"]["imports"] - result["open_tables_mib"]


def total_peak(result: dict) -> float:
    return result["peak_mib"] + sum(result["workers_peak_mib"])


def print_table(results: list[dict], args: argparse.Namespace) -> None:
    print(
        f"\nF = {args.feature_dim} (float16), {args.shard_size} rows per shard, num_workers = "
        f"{'training default' if args.num_workers is None else args.num_workers}"
        + f", shuffle_window_shards = {'training default' if args.shuffle_window_shards is None else args.shuffle_window_shards}"
    )
    header = (
        f"{'utterances':>10} {'shards':>6} {'hours':>6} {'index s':>8} {'plan s/ep':>9} {'batches':>7} "
        f"{'epoch s':>8} {'utt/s':>6} {'opens s':>8} {'peak RSS MiB':>12} {'workers MiB':>11} "
        f"{'open tables MiB':>15} {'rest MiB':>8}"
    )
    print(header)
    for r in results:
        opens = "-" if r["shard_open_seconds"] is None else f"{r['shard_open_seconds']:.1f}"
        print(
            f"{r['utterances']:>10,} {r['shards']:>6} {r['audio_hours']:>6.0f} {r['index_seconds']:>8.2f} "
            f"{r['plan_seconds']:>9.2f} {r['batches']:>7,} {r['epoch_seconds']:>8.1f} "
            f"{r['utterances'] / r['epoch_seconds']:>6,.0f} {opens:>8} {r['peak_mib']:>12,.0f} "
            f"{sum(r['workers_peak_mib']):>11,.0f} {r['open_tables_mib']:>15,.0f} {rest_mib(r):>8,.0f}"
        )
    print(
        "opens s: time in ShardDataset shard opens (read + decompress + fingerprint; num_workers 0 only); "
        "rest: peak - imports - open shard tables (index, plans, batches, allocator retention)"
    )
    print("\npeak RSS after each phase (MiB, cumulative peaks of the measuring process):")
    print(f"{'utterances':>10} " + " ".join(f"{name:>13}" for name in results[0]["phases_peak_mib"]))
    for r in results:
        print(f"{r['utterances']:>10,} " + " ".join(f"{v:>13,.0f}" for v in r["phases_peak_mib"].values()))
    first = results[0]
    for r in results[1:]:
        ratio = total_peak(r) / total_peak(first)
        verdict = "flat" if ratio <= 1.2 else "NOT flat"
        print(
            f"peak RSS {r['utterances']:,} / {first['utterances']:,}: {ratio:.2f} ({verdict}; target <= 1.2); "
            f"index build {r['index_seconds'] / first['index_seconds']:.1f}x, "
            f"planning {r['plan_seconds'] / first['plan_seconds']:.1f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="utterances per run")
    parser.add_argument("--quick", action="store_true", help=f"smoke run: sizes {QUICK_SIZES}")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=Path("/tmp/asr_pipeline_bench_librispeech_scale"),
        help="corpus cache, reused across runs",
    )
    parser.add_argument("--feature-dim", type=int, default=8, help="F; only the feature bytes scale with it")
    parser.add_argument("--shard-size", type=int, default=512, help="rows per shard (features stage: 512)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-workers", type=int, default=None, help="default: DataConfig's (0)")
    parser.add_argument(
        "--shuffle-window-shards",
        type=int,
        default=None,
        help="data.shuffle_window_shards (default: DataConfig's, 8); 0: one global shuffle, as before windows",
    )
    args = parser.parse_args()
    sizes = sorted(QUICK_SIZES if args.quick else args.sizes)
    shards_needed = math.ceil(sizes[-1] / args.shard_size)
    paths = ensure_corpus(args.workdir, shards_needed, args.shard_size, args.feature_dim, args.seed)
    results = []
    for size in sizes:
        results.append(run_size(size, paths[: math.ceil(size / args.shard_size)], args))
        print(json.dumps(results[-1]), flush=True)
    print_table(results, args)


if __name__ == "__main__":
    if sys.argv[1:] == ["--measure"]:
        print(json.dumps(measure(json.loads(sys.stdin.read()))))
    else:
        main()
