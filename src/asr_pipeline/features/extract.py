"""Manifest rows -> feature shard tables: decode, resample, features, tokenize; bad rows counted.

The features are the named frontend's (features/frontends.py): 80-dim Kaldi fbank, or w2v-bert's
160-dim stacked fbank. With ``jobs > 1`` the audio work (decode, resample, features: nearly all the time)
runs in worker processes over chunks of rows, and the results are consumed in manifest order; tokenization,
the skip report and sharding stay in this process, so the shards are byte-identical to ``jobs=1``.

Without a tokenizer (features for self-supervised pretraining) rows keep the tokens their manifest gives,
else none, and their text as it is. With one, transcripts it can spell only with ``<unk>`` pieces (another
language or script than it was trained on) are counted in the report (``kept_with["unknown pieces"]``) and
skipped when their share of unknown pieces exceeds ``max_unknown_token_share``. A run that keeps nothing
raises ``NothingKeptError`` (the skips by reason in its message) instead of writing an empty shard.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import NamedTuple

import numpy as np
import pyarrow as pa
from tqdm import tqdm

from asr_pipeline.augment import AugmentationMix
from asr_pipeline.executors import ExecutorOptions, map_ordered, start_worker_server
from asr_pipeline.features.fbank_options import FbankOptions
from asr_pipeline.features.frontends import FRONTEND_KINDS, Frontend, frontend_named
from asr_pipeline.features.precomputed import (
    PAYLOAD_ERROR,
    FeatureError,
    attach_payloads,
    load_precomputed,
)
from asr_pipeline.io.audio import AudioDecodeError, AudioTooLongError
from asr_pipeline.io.audio_segment import load_audio_segment
from asr_pipeline.io.report import SkipReport
from asr_pipeline.io.shards import FEATURE_DTYPES, records_to_table
from asr_pipeline.options import options_from_dict
from asr_pipeline.text.tokenizer import CTCTokenizer

# Rows per task sent to a worker: large enough that pickling and IPC per task are negligible next to
# decoding a few seconds of audio, small enough that a chunk's features (~32 KB per audio second) stay small.
CHUNK_ROWS = 8
# Chunks in flight per worker: keeps every worker busy while the main process tokenizes and writes, and
# bounds memory to jobs * CHUNKS_IN_FLIGHT_PER_JOB * CHUNK_ROWS utterances however long the manifest is
# (jobs=2: 192 utterances, ~30 MB of features at 5 s each). Compressing a 512-row shard takes the main
# process ~0.17 s, in which two workers featurize ~190 rows; with 3 chunks per job (48 rows) they stalled:
# 1500 utterances took 1.88-1.94 s with jobs=2, 1.72-1.75 s with 12.
CHUNKS_IN_FLIGHT_PER_JOB = 12
# With jobs > 1, this process featurizes rows itself until the forkserver is up (see _featurize_parallel).
HELP_WHILE_WORKERS_START = True
# The report note (SkipReport.notes) of kept utterances with at least one <unk> piece.
UNKNOWN_PIECES = "unknown pieces"


@dataclass(frozen=True)
class ExtractionOptions:
    fbank: FbankOptions = field(default_factory=FbankOptions)
    # The frontend by name (features.frontends.FRONTEND_KINDS): "fbank" (80-dim Kaldi fbank), "w2v-bert"
    # (160-dim stacked normalized fbank), "mfcc", "waveform". An architecture's comes from models.registry
    # (frontend_of; models.feature_options.extraction_options reads params.yaml features.architecture), so
    # the features know no architecture.
    frontend_name: str = "fbank"
    shard_size: int = 512  # examples per shard: fewer, larger files keep DVC fast
    max_audio_duration_sec: float | None = 30.0
    strict: bool = False
    jobs: int = 1  # worker processes for decode + resample + features; 1 runs everything in this process
    # Width every shard row must have (F): precomputed features are checked against it. None: the
    # frontend's width (``feature_dim`` gives the resolved value).
    input_dim: int | None = None
    feature_dtype: str = "float32"  # shard storage: float32, or float16 (half the size; readers widen it)
    # Skip an utterance when more than this share of its pieces are <unk> (CTCTokenizer.unknown_share:
    # bare word boundaries not counted, so text in a script the tokenizer never saw scores 1.0). 0.5: a
    # target that is mostly <unk> teaches nothing, while a name with one foreign letter stays. 1.0 never
    # skips; kept utterances with any <unk> are counted either way.
    max_unknown_token_share: float = 0.5
    # Waveform conditions (augment.AugmentationMix: speed, noise, reverb, telephone, codec) applied to the
    # audio before the frontend, one per utterance drawn from (seed, utterance id): cached augmented variants
    # of the training set, or one fixed condition for an evaluation split. None: the audio as it is.
    augmentation: AugmentationMix | None = None
    # Where the audio work runs with jobs > 1 or a Dask executor (asr_pipeline.executors): the local process
    # pool, or a Dask cluster (kind: dask, address: the scheduler's; none: a LocalCluster of `jobs`
    # workers). The shards are byte-identical either way.
    executor: ExecutorOptions = field(default_factory=ExecutorOptions)

    def __post_init__(self) -> None:
        where = "params.yaml features"
        if self.frontend_name not in FRONTEND_KINDS:
            raise ValueError(
                f"{where}: frontend_name must be one of {', '.join(FRONTEND_KINDS)}, got {self.frontend_name!r}"
            )
        if self.shard_size < 1:
            raise ValueError(f"{where}: shard_size must be >= 1, got {self.shard_size}")
        if self.jobs < 1:
            raise ValueError(f"{where}: jobs must be >= 1, got {self.jobs}")
        if self.input_dim is not None and self.input_dim < 1:
            raise ValueError(f"{where}: input_dim must be >= 1 or null, got {self.input_dim}")
        if self.feature_dtype not in FEATURE_DTYPES:
            raise ValueError(
                f"{where}: feature_dtype must be one of {', '.join(FEATURE_DTYPES)}, got {self.feature_dtype!r}"
            )
        if not 0.0 <= self.max_unknown_token_share <= 1.0:
            raise ValueError(
                f"{where}: max_unknown_token_share must lie in [0, 1] (1: never skip), got "
                f"{self.max_unknown_token_share}"
            )

    @classmethod
    def from_dict(cls, values: dict | None) -> ExtractionOptions:
        values = dict(values or {})
        values["fbank"] = FbankOptions.from_dict(values.get("fbank"))
        values["executor"] = ExecutorOptions.from_dict(values.get("executor"))
        if values.get("augmentation") is not None:
            values["augmentation"] = AugmentationMix.from_dict(values["augmentation"], "augmentation")
        return options_from_dict(cls, values, "params.yaml features")

    @property
    def frontend(self) -> Frontend:
        return frontend_named(self.frontend_name, self.fbank)

    @property
    def feature_dim(self) -> int:
        """F of every shard row: ``input_dim`` when given, else the frontend's width (80 or 160)."""
        return self.input_dim if self.input_dim is not None else self.frontend.feature_dim

    @property
    def frame_shift_ms(self) -> float:
        """Audio time per feature frame (10 ms; 20 ms for w2v-bert's stacked frames)."""
        return self.frontend.frame_shift_ms


class AudioOutcome(NamedTuple):
    """What the audio half of extraction made of one row: features, or the reason to skip it."""

    features: np.ndarray | None  # (T, F) float32; None when skipped
    duration_ms: int
    skip_reason: str | None = None
    skip_detail: str = ""
    condition: str | None = None  # the augmentation condition applied (ExtractionOptions.augmentation)


def featurize_audio(
    audio: str | bytes,
    frontend: Frontend,
    max_audio_duration_sec: float | None,
    offset_sec: float | None = None,
    duration_sec: float | None = None,
    augment: Callable[[np.ndarray, int], tuple[str, np.ndarray]] | None = None,
) -> AudioOutcome:
    """Decode (a file path or encoded bytes; the segment ``offset_sec``/``duration_sec`` of it when a Kaldi
    ``segments`` line gives one), resample and compute the frontend's features; audio problems become a skip
    reason (missing file, empty/truncated/undecodable/silent/non-finite audio, a segment outside the audio,
    too long: read from the header before decoding where it can be, ...), not an error. ``augment`` (waveform,
    rate) -> (condition name, waveform) transforms the decoded audio first; durations are the transformed
    audio's (speed perturbation changes them, the transcript stays)."""
    sample_rate = frontend.sample_rate
    try:
        waveform = load_audio_segment(  # (N,)
            audio, sample_rate, offset_sec, duration_sec, max_duration_sec=max_audio_duration_sec
        )
    except AudioTooLongError as error:
        return AudioOutcome(None, error.duration_ms, error.reason, str(error))
    except AudioDecodeError as error:
        return AudioOutcome(None, 0, error.reason, str(error))
    condition = None
    if augment is not None and waveform.any():
        condition, waveform = augment(waveform, sample_rate)
        waveform = waveform.astype(np.float32, copy=False)
    duration_ms = round(1000 * waveform.shape[0] / sample_rate)
    if not waveform.any():
        return AudioOutcome(None, duration_ms, "silent audio")
    features = frontend(waveform)  # (T, F)
    if features.shape[0] == 0:  # fbank: < 25 ms; w2v-bert: < 35 ms (two frames stack into one)
        return AudioOutcome(None, duration_ms, "audio shorter than one frame", f"{duration_ms} ms")
    if not np.isfinite(features).all():  # finite audio should not get here; a shard must never hold NaN
        bad_frame = int(np.flatnonzero(~np.isfinite(features).all(axis=1))[0])
        return AudioOutcome(None, duration_ms, "NaN/Inf features", f"frame {bad_frame} holds NaN or Inf")
    return AudioOutcome(features, duration_ms, condition=condition)


def featurize_row(row: dict, options: ExtractionOptions) -> AudioOutcome:
    """Features for one manifest row of any kind (see io/manifests.py ManifestRecord.kind).

    Audio (a file, or bytes put back by ``attach_payloads``) goes through the frontend; precomputed features
    (inline or a file) are checked and passed through, with ``duration_ms = rows * 10``.
    """
    if row.get(PAYLOAD_ERROR):
        return AudioOutcome(None, 0, "record not found in its source", row[PAYLOAD_ERROR])
    kind = row.get("kind") or "audio_file"  # rows made before kinds existed carry only an audio_path
    if kind in ("features_inline", "features_file"):
        # None: the width the audio frontend would produce, so precomputed and extracted rows can mix.
        input_dim = options.feature_dim
        try:
            features = load_precomputed(row, input_dim)  # (T, F)
        except FeatureError as error:
            return AudioOutcome(None, 0, error.reason, error.detail)
        # One frame per frame shift of the configured frontend: 10 ms for fbank, 20 ms for w2v-bert's pairs.
        duration_ms = round(options.frame_shift_ms * features.shape[0])
        if options.max_audio_duration_sec is not None and duration_ms > 1000 * options.max_audio_duration_sec:
            return AudioOutcome(None, duration_ms, "longer than max_audio_duration_sec", f"{duration_ms} ms")
        return AudioOutcome(features, duration_ms)
    audio = row["audio_bytes"] if kind == "audio_bytes" else row["audio_path"]
    augment = None
    if options.augmentation is not None:
        mix, utterance_id = options.augmentation, str(row["id"])

        def augment(waveform: np.ndarray, sample_rate: int) -> tuple[str, np.ndarray]:
            return mix.augment(utterance_id, waveform, sample_rate)

    return featurize_audio(
        audio,
        options.frontend,
        options.max_audio_duration_sec,
        row.get("offset_sec"),
        row.get("duration_sec"),
        augment,
    )


def _featurize_chunk(rows: list[dict], options: ExtractionOptions) -> list[AudioOutcome]:
    return [featurize_row(row, options) for row in rows]


def _featurize_serial(
    rows: Iterable[dict], options: ExtractionOptions
) -> Iterator[tuple[dict, AudioOutcome]]:
    # One torch thread here too (set per row, so the caller's setting holds between rows). Measured on this
    # 2-core machine, the naive loop over 300 utterances: idle, two threads were only 1.26x faster than
    # one; with other processes busy (load 3.7), two threads ran at 281 audio s/s and one at 1576, as
    # torch's threads spin-wait for a core. Workers (--jobs) are the way to use more cores.
    for row in rows:
        (outcome,) = _featurize_chunk_single_threaded([row], options)
        yield row, outcome


def _featurize_chunk_single_threaded(rows: list[dict], options: ExtractionOptions) -> list[AudioOutcome]:
    """``_featurize_chunk`` in this process with one torch thread, as a worker runs it (see init_worker)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _featurize_chunk(rows, options)
    finally:
        torch.set_num_threads(threads)


def _featurize_parallel(
    rows: Iterable[dict], options: ExtractionOptions
) -> Iterator[tuple[dict, AudioOutcome]]:
    """Like ``_featurize_serial``, in ``options.jobs`` processes, in the same order, a bounded window ahead.

    Until the forkserver is up (its torch import: about 1.2 s when nothing started it earlier), this
    process featurizes chunks itself, in order, so start-up costs no idle core; a manifest finished by
    then never starts a pool. Then every further chunk goes to the pool. Both run ``_featurize_chunk``
    with one torch thread, so which process computed a row never changes its bytes.
    """
    row_iter = iter(rows)

    def next_chunk() -> list[dict]:
        return list(islice(row_iter, CHUNK_ROWS))

    server_ready = start_worker_server()
    while HELP_WHILE_WORKERS_START and not server_ready.is_set():
        chunk = next_chunk()
        if not chunk:
            return
        yield from zip(chunk, _featurize_chunk_single_threaded(chunk, options), strict=True)

    yield from _featurize_on(ExecutorOptions(), iter(next_chunk, []), options)


def _featurize_dask(rows: Iterable[dict], options: ExtractionOptions) -> Iterator[tuple[dict, AudioOutcome]]:
    """Like ``_featurize_parallel``, on a Dask cluster (``options.executor``): chunks of rows go to the
    workers, results come back in manifest order, and this process tokenizes and writes as before, so the
    shards are byte-identical to a local run. A chunk whose worker died is rerun by the scheduler
    (asr_pipeline.executors). Paths travel absolute: a worker's working folder is not this one's."""
    row_iter = (_with_absolute_paths(row) for row in rows)
    yield from _featurize_on(options.executor, iter(lambda: list(islice(row_iter, CHUNK_ROWS)), []), options)


def _featurize_on(
    executor: ExecutorOptions, chunks: Iterator[list[dict]], options: ExtractionOptions
) -> Iterator[tuple[dict, AudioOutcome]]:
    results = map_ordered(
        _featurize_chunk,
        chunks,
        options,
        jobs=options.jobs,
        executor=executor,
        ahead_per_worker=CHUNKS_IN_FLIGHT_PER_JOB,
        describe=_chunk_location,
    )
    try:
        for chunk, outcomes in results:
            yield from zip(chunk, outcomes, strict=True)
    finally:  # also on a strict-mode error or an early stop (--max-samples): do not finish the manifest
        results.close()


def _with_absolute_paths(row: dict) -> dict:
    paths = {key: os.path.abspath(row[key]) for key in ("audio_path", "features_path") if row.get(key)}
    return {**row, **paths} if paths else row


def _chunk_location(chunk: list[dict]) -> str:
    return f"featurizing {len(chunk)} rows from {chunk[0]['location']} to {chunk[-1]['location']}"


# Called after each manifest row with the row, what the audio stage made of it, its shard record (None when
# skipped) and the report so far; the --tui view of extract-features is one.
RowObserver = Callable[[dict, AudioOutcome, "dict | None", SkipReport], None]


def extract_records(
    rows: Iterable[dict],
    tokenizer: CTCTokenizer | None,
    options: ExtractionOptions,
    report: SkipReport,
    total: int | None = None,
    desc: str = "features",
    on_row: RowObserver | None = None,
) -> Iterator[dict]:
    """Yield shard records (features as (T, F)) for manifest rows, skipping and counting bad ones.

    ``tokenizer`` None: no tokenization (module docstring). Once every row is consumed, raises
    ``NothingKeptError`` if none was kept, so no caller writes an empty shard.
    """
    if options.executor.kind == "dask":
        featurize = _featurize_dask
    else:
        featurize = _featurize_parallel if options.jobs > 1 else _featurize_serial
    if tokenizer is not None:
        report.note(UNKNOWN_PIECES, 0)  # reported even when no transcript has any
    # Embedded audio and inline features are re-read here, streaming, from the raw manifest.
    outcomes = featurize(attach_payloads(rows), options)
    try:
        for row, audio in tqdm(outcomes, total=total, desc=desc, unit="utt", mininterval=2.0):
            record = _record_or_skip(row, audio, tokenizer, options, report)
            if on_row is not None:
                on_row(row, audio, record, report)
            if record is not None:
                yield record
    finally:
        outcomes.close()  # stops the worker pool now, not when the generator is garbage-collected
    report.require_kept("feature extraction")


def _record_or_skip(
    row: dict,
    audio: AudioOutcome,
    tokenizer: CTCTokenizer | None,
    options: ExtractionOptions,
    report: SkipReport,
) -> dict | None:
    """The shard record of one featurized row, or None after counting why it is skipped."""
    report.seen += 1
    location = row["location"]
    if audio.skip_reason is not None:
        report.skip(audio.skip_reason, location, audio.skip_detail)
        return None
    width = audio.features.shape[1]
    if width != options.feature_dim:  # a configuration error, not a bad row: every audio row would fail
        raise ValueError(
            f"{location}: the {options.frontend_name} frontend makes {width}-dim features but input_dim is "
            f"{options.feature_dim}; drop --input-dim (params.yaml features.input_dim) or set it to {width}"
        )
    if tokenizer is None:
        tokens = row.get("tokens") or []
    else:
        tokens = _checked_tokens(row, tokenizer, options, report)
        if tokens is None:
            return None
    report.kept += 1
    if audio.condition is not None:
        report.note(f"condition {audio.condition}")
    return {
        "id": row["id"],
        "features": audio.features,
        "tokens": tokens,
        "duration_ms": audio.duration_ms,
        "text": row.get("text"),
    }


def _checked_tokens(
    row: dict, tokenizer: CTCTokenizer, options: ExtractionOptions, report: SkipReport
) -> list[int] | None:
    """The row's tokens (given, else its text encoded), or None after counting why they are unusable."""
    location = row["location"]
    tokens = row["tokens"] if row.get("tokens") is not None else tokenizer.encode(row["text"])
    if not tokens:
        report.skip("no tokens", location)
        return None
    bad = [t for t in tokens if not 0 <= t < tokenizer.vocab_size or t == tokenizer.blank_id]
    if bad:
        report.skip(
            "token id outside the vocabulary",
            location,
            f"{bad[:5]} not in [0, {tokenizer.vocab_size}) minus blank {tokenizer.blank_id}",
        )
        return None
    unknown = tokenizer.unknown_share(tokens)
    if unknown > options.max_unknown_token_share:
        report.skip(
            "too many unknown pieces",
            location,
            f"{unknown:.0%} of the pieces of {row.get('text')!r:.80} are <unk>, above "
            f"max_unknown_token_share={options.max_unknown_token_share:g}: the tokenizer cannot spell this "
            "text (another language or script?); train the tokenizer on such text, or raise "
            "features.max_unknown_token_share (--max-unknown-token-share)",
        )
        return None
    if unknown > 0:
        report.note(UNKNOWN_PIECES)
    return tokens


def batch_into_shards(
    records: Iterable[dict], shard_size: int, feature_dtype: str = "float32"
) -> Iterator[pa.Table]:
    """Group records into shard tables of ``shard_size`` rows (the last may be shorter)."""
    pending: list[dict] = []
    for record in records:
        pending.append(record)
        if len(pending) == shard_size:
            yield records_to_table(pending, feature_dtype)
            pending = []
    if pending:
        yield records_to_table(pending, feature_dtype)
