"""Feature extraction throughput: a naive single-process loop vs ours with jobs=1, jobs=2 and a Dask cluster.

The corpus is 300 espeak-ng utterances at 22.05 kHz (``build_demo_corpus``) in a temporary folder. Each
method reads every WAV, resamples to 16 kHz, computes 80-bin Kaldi fbank and writes Parquet:

    naive           soundfile -> torchaudio.functional.resample -> torchaudio kaldi.fbank -> pyarrow, one
                    process, torch's default threads (one per core)
    naive 1 thread  the same with one torch thread
    ours jobs=1     ``extract_records`` + ``batch_into_shards`` + ``write_shard`` (also tokenizes, checks,
                    fsyncs each shard)
    ours jobs=2     the same with two workers forked from the forkserver; the pool's start-up is timed, the
                    forkserver's own start is not (the CLI starts it before reading manifests)
    ours jobs=2 cold  ... and with the forkserver's start (torch imported once, ~1.2 s of one core) timed:
                    this process featurizes rows itself meanwhile, so a small corpus runs at jobs=1 speed
    dask 2 workers  ``features.executor: {kind: dask, address: ...}`` on a ``distributed.LocalCluster`` of
                    two worker processes (one thread each) on 127.0.0.1, started and warmed up untimed, as a
                    team's standing cluster would be
    dask 2 workers cold  ``features.executor: dask`` without an address: the stage starts a LocalCluster of
                    ``jobs`` workers and closes it after, all timed (what one `dvc repro` of the stage pays)

Every timed run is a fresh process, as a real extraction is: each utterance length is seen once, so
per-shape caches (oneDNN builds a conv primitive per input length, 2 ms each) are as cold as in
production; timing repeats in one process would let the naive loop reuse them. Each process first warms up
on the first 16 utterances (imports, first calls), then times the other 284. Best of 3 runs.
The jobs=2 and Dask shards are checked to be byte-identical to jobs=1's.
Printed: audio seconds processed per wall-clock second, and ours(jobs=2) / the faster naive row (issue 4
asks >= 1.8x). On a 2-core machine jobs=2 can at best double one core's speed.

    .venv/bin/python benchmarks/bench_extract.py        # or: make bench
    .venv/bin/python benchmarks/bench_extract.py --train-size 1500
    .venv/bin/python benchmarks/bench_extract.py --methods "ours jobs=2" "dask 2 workers"   # issue 18's pair
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

TRAIN_SIZE = 300
WARMUP_FILES = 16
REPEATS = 3
TARGET_RATIO = 1.8
METHODS = (
    "naive",
    "naive 1 thread",
    "ours jobs=1",
    "ours jobs=2",
    "ours jobs=2 cold",
    "dask 2 workers",
    "dask 2 workers cold",
)


def naive_extract(rows: list[dict], output: Path) -> None:
    """What one would write without this project: one process, one file at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import soundfile
    import torch
    import torchaudio.functional as AF
    from torchaudio.compliance import kaldi

    ids, features, texts = [], [], []
    for row in rows:
        data, rate = soundfile.read(row["audio_path"], dtype="float32")
        waveform = torch.from_numpy(data)
        if rate != 16000:
            waveform = AF.resample(waveform, rate, 16000)
        fbank = kaldi.fbank(waveform.unsqueeze(0) * 32768.0, num_mel_bins=80, dither=0.0, energy_floor=0.0)
        ids.append(row["id"])
        features.append(fbank.numpy().reshape(-1))  # (T * F,)
        texts.append(row["text"])
    table = pa.table({"id": ids, "features": pa.array(features, pa.list_(pa.float32())), "text": texts})
    pq.write_table(table, output / "naive.parquet", compression="zstd")


def ours(jobs: int, tokenizer_path: Path, executor: dict | None = None) -> Callable[[list[dict], Path], None]:
    from asr_pipeline.features.extract import ExtractionOptions, batch_into_shards, extract_records
    from asr_pipeline.io.report import SkipReport
    from asr_pipeline.io.shards import shard_name, write_shard
    from asr_pipeline.text.tokenizer import CTCTokenizer

    tokenizer = CTCTokenizer.from_file(tokenizer_path)

    def extract(rows: list[dict], output: Path) -> None:
        options = ExtractionOptions.from_dict({"jobs": jobs, "executor": executor})
        records = extract_records(
            rows, tokenizer, options, SkipReport(), total=len(rows), desc=f"jobs={jobs}"
        )
        for index, table in enumerate(batch_into_shards(records, options.shard_size)):
            write_shard(table, output / shard_name(index))

    return extract


def time_one_run(method: str, rows_path: Path, tokenizer_path: Path, output: Path) -> float:
    """In this (fresh) process: warm up on the first rows, then time ``method`` on the rest."""
    import torch

    rows = json.loads(rows_path.read_text())
    warm_up, timed = rows[:WARMUP_FILES], rows[WARMUP_FILES:]
    if method == "naive":
        run = naive_extract
    elif method == "naive 1 thread":
        torch.set_num_threads(1)
        run = naive_extract
    elif method == "dask 2 workers":
        from distributed import LocalCluster

        cluster = LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",
        )
        run = ours(2, tokenizer_path, {"kind": "dask", "address": cluster.scheduler_address})
    elif method == "dask 2 workers cold":
        run = ours(2, tokenizer_path, {"kind": "dask"})
    else:
        run = ours(1 if method == "ours jobs=1" else 2, tokenizer_path)
    cold = method in ("ours jobs=2 cold", "dask 2 workers cold")
    warm_up_run = ours(1, tokenizer_path) if cold else run  # leaves no forkserver, no cluster
    warm_up_run(warm_up, Path(tempfile.mkdtemp(dir=output.parent)))
    if method == "ours jobs=2":  # 16 rows finish before the forkserver is up: wait for it, as documented
        from asr_pipeline.executors import start_worker_server

        start_worker_server().wait()
    output.mkdir()
    start = time.perf_counter()
    run(timed, output)
    return time.perf_counter() - start


def same_bytes(first: Path, second: Path) -> bool:
    names = sorted(path.name for path in first.iterdir())
    if names != sorted(path.name for path in second.iterdir()):
        return False
    return all((first / name).read_bytes() == (second / name).read_bytes() for name in names)


def build_corpus(workdir: Path, train_size: int) -> tuple[Path, Path, float]:
    """The corpus, its rows (JSON) and a tokenizer; returns their paths and the timed audio seconds."""
    import soundfile

    from asr_pipeline.demo.corpus import DemoCorpusParams, build_demo_corpus
    from asr_pipeline.text.sentencepiece_training import SentencePieceOptions, train_sentencepiece

    files = build_demo_corpus(DemoCorpusParams(train_size=train_size, dev_size=0, test_size=0, jobs=2))
    for name, content in files.items():
        (workdir / name).parent.mkdir(parents=True, exist_ok=True)
        (workdir / name).write_bytes(content)
    rows = []
    for i, wav in enumerate(sorted((workdir / "train").glob("*.wav"))):
        text = wav.with_suffix(".txt").read_text(encoding="utf-8").strip()
        rows.append({"id": wav.stem, "location": f"{wav}:{i}", "audio_path": str(wav), "text": text})
    rows_path, tokenizer_path = workdir / "rows.json", workdir / "tokenizer.model"
    rows_path.write_text(json.dumps(rows))
    tokenizer_path.write_bytes(train_sentencepiece([row["text"] for row in rows], SentencePieceOptions()))
    audio_seconds = sum(soundfile.info(row["audio_path"]).duration for row in rows[WARMUP_FILES:])
    return rows_path, tokenizer_path, audio_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train-size", type=int, default=TRAIN_SIZE, help="utterances to synthesize")
    parser.add_argument(
        "--methods", nargs="+", choices=METHODS, default=list(METHODS), metavar="METHOD", help="rows to time"
    )
    parser.add_argument("--repeats", type=int, default=REPEATS, help="fresh processes per method (best kept)")
    parser.add_argument(
        "--time-one-run", nargs=4, metavar=("METHOD", "ROWS", "TOKENIZER", "OUTPUT"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.time_one_run:  # the child process of one timed run
        method, rows_path, tokenizer_path, output = args.time_one_run
        print(json.dumps(time_one_run(method, Path(rows_path), Path(tokenizer_path), Path(output))))
        return

    import torch

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        rows_path, tokenizer_path, audio_seconds = build_corpus(workdir, args.train_size)
        best: dict[str, float] = {}
        for repeat in range(args.repeats):  # methods interleaved, so a load change hits them alike
            for method in args.methods:
                output = workdir / f"{method.replace(' ', '-')}-{repeat}"
                command = [
                    sys.executable,
                    __file__,
                    "--time-one-run",
                    method,
                    str(rows_path),
                    str(tokenizer_path),
                    str(output),
                ]
                done = subprocess.run(command, capture_output=True, text=True, check=True)
                best[method] = min(
                    best.get(method, float("inf")), float(done.stdout.strip().splitlines()[-1])
                )
        reference = workdir / "ours-jobs=1-0"
        if not reference.exists():  # jobs=1 not among the timed methods: write its shards untimed
            reference.mkdir()
            ours(1, tokenizer_path)(json.loads(rows_path.read_text())[WARMUP_FILES:], reference)
        identical = {
            method: same_bytes(reference, workdir / f"{method.replace(' ', '-')}-0")
            for method in args.methods
            if method.startswith(("ours jobs=2", "dask"))
        }

    speeds = {method: audio_seconds / seconds for method, seconds in best.items()}
    # The baseline of the ratio column: the faster naive row, else the process pool (jobs=2).
    base_name = "naive" if "naive" in speeds or "naive 1 thread" in speeds else "ours jobs=2"
    base = max(speed for name, speed in speeds.items() if name.startswith(base_name))
    print(
        f"{args.train_size - WARMUP_FILES} timed utterances, {audio_seconds:.0f} s of audio, {os.cpu_count()} "
        f"CPU cores, torch {torch.__version__}; best of {args.repeats} fresh processes; load average "
        f"{os.getloadavg()[0]:.1f}"
    )
    print(f"{'method':<20}{'audio s / wall s':>18}{'vs base':>10}  (base: the faster {base_name} row)")
    for name, speed in speeds.items():
        print(f"{name:<20}{speed:>18.1f}{speed / base:>9.2f}x")
    for method, same in identical.items():
        print(f"{method} shards byte-identical to jobs=1's: {same}")
    if base_name == "naive" and "ours jobs=2" in speeds:
        ratio = speeds["ours jobs=2"] / base
        verdict = "meets" if ratio >= TARGET_RATIO else "misses"
        print(f"ours(jobs=2) / naive = {ratio:.2f}x ({verdict} the {TARGET_RATIO}x target)")


if __name__ == "__main__":
    main()
