"""Manifest rows -> feature shard tables: decode, resample, fbank, tokenize; bad rows counted.

With ``jobs > 1`` the audio work (decode, resample, fbank: nearly all the time) runs in worker processes
over chunks of rows, and the results are consumed in manifest order; tokenization, the skip report and
sharding stay in this process, so the shards are byte-identical to ``jobs=1``.
"""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from itertools import islice
from typing import NamedTuple

import numpy as np
import pyarrow as pa
from tqdm import tqdm

from asr_pipeline.features.fbank import FbankOptions, compute_fbank
from asr_pipeline.io.audio import AudioDecodeError, load_audio
from asr_pipeline.io.report import SkipReport
from asr_pipeline.io.shards import records_to_table
from asr_pipeline.options import options_from_dict
from asr_pipeline.text.tokenizer import CTCTokenizer

# Rows per task sent to a worker: large enough that pickling and IPC per task are negligible next to
# decoding a few seconds of audio, small enough that a chunk's features (~32 KB per audio second) stay small.
CHUNK_ROWS = 8
# Chunks in flight per worker: keeps every worker busy while the main process tokenizes and writes, and
# bounds memory to jobs * CHUNKS_IN_FLIGHT_PER_JOB * CHUNK_ROWS utterances however long the manifest is.
CHUNKS_IN_FLIGHT_PER_JOB = 3


@dataclass(frozen=True)
class ExtractionOptions:
    fbank: FbankOptions = field(default_factory=FbankOptions)
    shard_size: int = 512  # examples per shard: fewer, larger files keep DVC fast
    max_audio_duration_sec: float | None = 30.0
    strict: bool = False
    jobs: int = 1  # worker processes for decode + resample + fbank; 1 runs everything in this process

    @classmethod
    def from_dict(cls, values: dict | None) -> ExtractionOptions:
        values = dict(values or {})
        values["fbank"] = FbankOptions.from_dict(values.get("fbank"))
        options = options_from_dict(cls, values, "params.yaml features")
        if options.shard_size < 1:
            raise ValueError(f"params.yaml features: shard_size must be >= 1, got {options.shard_size}")
        if options.jobs < 1:
            raise ValueError(f"params.yaml features: jobs must be >= 1, got {options.jobs}")
        return options


class AudioOutcome(NamedTuple):
    """What the audio half of extraction made of one row: features, or the reason to skip it."""

    features: np.ndarray | None  # (T, F) float32; None when skipped
    duration_ms: int
    skip_reason: str | None = None
    skip_detail: str = ""


def featurize_audio(
    audio_path: str, fbank: FbankOptions, max_audio_duration_sec: float | None
) -> AudioOutcome:
    """Decode, resample and compute fbank for one file; audio problems become a skip reason, not an error."""
    sample_rate = fbank.sample_rate
    try:
        waveform = load_audio(audio_path, sample_rate)  # (N,)
    except AudioDecodeError as error:
        return AudioOutcome(None, 0, "undecodable audio", str(error))
    duration_ms = round(1000 * waveform.shape[0] / sample_rate)
    if max_audio_duration_sec is not None and duration_ms > 1000 * max_audio_duration_sec:
        return AudioOutcome(None, duration_ms, "longer than max_audio_duration_sec", f"{duration_ms} ms")
    if not waveform.any():
        return AudioOutcome(None, duration_ms, "silent audio")
    features = compute_fbank(waveform, fbank)  # (T, F)
    if features.shape[0] == 0:
        return AudioOutcome(None, duration_ms, "audio shorter than one frame", f"{duration_ms} ms")
    return AudioOutcome(features, duration_ms)


def _featurize_chunk(
    audio_paths: list[str], fbank: FbankOptions, max_audio_duration_sec: float | None
) -> list[AudioOutcome]:
    return [featurize_audio(path, fbank, max_audio_duration_sec) for path in audio_paths]


def _init_worker() -> None:
    import torch

    # torch defaults to one intra-op thread per core, so `jobs` workers would run jobs * cores threads on
    # `cores` cores, and torch's threads spin-wait for each other. Measured on 2 cores, two processes each
    # resampling + fbank-ing 150 clips of ~5 s: 1.2-1.35 s with 1 thread each, 6.5 s with 2 threads each,
    # and 50 s with 2 threads each while a third process was busy. One thread per worker makes jobs = cores
    # use the machine exactly. The thread count does not change the output (the jobs=1 vs jobs=2
    # byte-identity test checks it).
    torch.set_num_threads(1)


def _featurize_serial(
    rows: Iterable[dict], options: ExtractionOptions
) -> Iterator[tuple[dict, AudioOutcome]]:
    for row in rows:
        yield row, featurize_audio(row["audio_path"], options.fbank, options.max_audio_duration_sec)


def _featurize_parallel(
    rows: Iterable[dict], options: ExtractionOptions
) -> Iterator[tuple[dict, AudioOutcome]]:
    """Like ``_featurize_serial``, in ``options.jobs`` processes, in the same order, a bounded window ahead.

    Spawned workers, not forked ones: forking a process that has started torch's (or a Kedro session's)
    threads can deadlock the child.
    """
    executor = ProcessPoolExecutor(
        max_workers=options.jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_init_worker
    )
    pending: deque[tuple[list[dict], Future]] = deque()
    row_iter = iter(rows)

    def submit_next() -> bool:
        chunk = list(islice(row_iter, CHUNK_ROWS))
        if chunk:
            paths = [row["audio_path"] for row in chunk]
            future = executor.submit(_featurize_chunk, paths, options.fbank, options.max_audio_duration_sec)
            pending.append((chunk, future))
        return bool(chunk)

    try:
        while len(pending) < options.jobs * CHUNKS_IN_FLIGHT_PER_JOB and submit_next():
            pass
        while pending:
            chunk, future = pending.popleft()
            outcomes = future.result()
            submit_next()
            yield from zip(chunk, outcomes, strict=True)
    finally:  # also on a strict-mode error or an early stop (--max-samples): do not finish the manifest
        executor.shutdown(wait=True, cancel_futures=True)


def extract_records(
    rows: Iterable[dict],
    tokenizer: CTCTokenizer,
    options: ExtractionOptions,
    report: SkipReport,
    total: int | None = None,
    desc: str = "features",
) -> Iterator[dict]:
    """Yield shard records (features as (T, F)) for manifest rows, skipping and counting bad ones."""
    featurize = _featurize_parallel if options.jobs > 1 else _featurize_serial
    outcomes = featurize(rows, options)
    try:
        for row, audio in tqdm(outcomes, total=total, desc=desc, unit="utt", mininterval=2.0):
            report.seen += 1
            location = row["location"]
            if audio.skip_reason is not None:
                report.skip(audio.skip_reason, location, audio.skip_detail)
                continue
            tokens = row["tokens"] if row.get("tokens") is not None else tokenizer.encode(row["text"])
            if not tokens:
                report.skip("no tokens", location)
                continue
            bad = [t for t in tokens if not 0 <= t < tokenizer.vocab_size or t == tokenizer.blank_id]
            if bad:
                report.skip(
                    "token id outside the vocabulary",
                    location,
                    f"{bad[:5]} not in [0, {tokenizer.vocab_size}) minus blank {tokenizer.blank_id}",
                )
                continue
            report.kept += 1
            yield {
                "id": row["id"],
                "features": audio.features,
                "tokens": tokens,
                "duration_ms": audio.duration_ms,
                "text": row["text"],
            }
    finally:
        outcomes.close()  # stops the worker pool now, not when the generator is garbage-collected


def batch_into_shards(records: Iterable[dict], shard_size: int) -> Iterator[pa.Table]:
    """Group records into shard tables of ``shard_size`` rows (the last may be shorter)."""
    pending: list[dict] = []
    for record in records:
        pending.append(record)
        if len(pending) == shard_size:
            yield records_to_table(pending)
            pending = []
    if pending:
        yield records_to_table(pending)
