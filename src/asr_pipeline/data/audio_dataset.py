"""On-the-fly training data: raw manifests (audio files, embedded audio bytes, precomputed features) per item.

Feature shards stay the fast path (``data.dataset``): decoding and fbank cost CPU every epoch. This path
lets a run train straight from ``io.manifests`` records, and is the only place waveform augmentation can
happen, because it needs the waveform before features exist.

Planning batches needs every example's length before anything is decoded. ``build_audio_index`` reads
the manifests once and takes, per record, in this order:

1. the manifest's frame count (``rows``, or a ``.rows``/``.frames`` sidecar hint) -- trusted as is;
2. the audio header (``soundfile.info``: samples and rate, no decoding): resampling N samples from rate
   r to the frontend's rate gives ``ceil(N * 16000 / r)`` samples (torchaudio's length), and 25 ms
   windows every 10 ms give ``T = 1 + (N16 - 400) // 160`` frames (Kaldi's snip_edges);
3. a full decode, for containers libsndfile cannot read a header of (M4A, WebM: ffmpeg).

Records with precomputed features (inline values or a ``.npy``/text feature file, ``features.precomputed``)
are not featurized: their ``rows`` are the frames, their width must be the frontend's, and their
``duration_ms`` is ``rows`` times the frontend's frame shift (10 ms fbank, 20 ms w2v-bert). Inline values are checked while indexing; a feature file is checked when
it is loaded (and read once while indexing only when the manifest gives no ``rows``/``cols``).

A record that fails all three, has neither tokens nor text to tokenize, carries neither audio nor
features, or whose features fail their checks, is skipped and counted in the index's ``SkipReport`` (by
reason, with the first locations).

Index columns (one row per kept record; ``rows``/``cols``/``duration_ms`` as in ``data.length_index`` so
the same selection and samplers apply)::

    id, location           string
    audio_path             string, null when the audio is embedded
    audio_bytes            large_binary, null when the audio is a file
    features_path          string   a precomputed feature file, else null
    features               large_list<float32>  inline precomputed features (T * F, row-major), else null
    text                   string   reference transcript (decoded from the tokens when absent)
    tokens                 list<int32>  CTC model ids
    rows, cols             int32    frames T (estimated as above) and the frontend's feature bins F
    duration_ms            int32

Embedded audio bytes and inline features stay in this table, in memory (one Arrow buffer that forked DataLoader workers
share without copying); a corpus of embedded audio larger than memory should be extracted to shards.

Item schema (``AudioDataset[(epoch, i)]``, or ``[i]`` without augmentation)::

    id            str
    features      (T, F) float32   frontend (or precomputed) features, SpecAugment applied on training items
    tokens        (U,)   int64
    text          str
    duration_ms   int

or a ``data.collate.SkippedExample`` when the audio cannot be decoded at training time (counted by the
training loop, never raised: see ``data.collate``).

Reproducibility: the waveform gain/noise and SpecAugment draws of item i in epoch e come from generators
seeded with ``(seed, e, i)`` -- independent of the worker that loads it, the number of workers and
whether the run was resumed. ``EpochTaggedBatchSampler`` hands the epoch to the dataset with every index,
because persistent DataLoader workers hold their own copy of the dataset and never see a ``set_epoch``.
"""

from __future__ import annotations

import io
import logging
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import pyarrow as pa
import soundfile
import torch
from torch.utils.data import Dataset, Sampler

from asr_pipeline.data.collate import SkippedExample
from asr_pipeline.data.sampler import LengthBucketedBatchSampler
from asr_pipeline.features import frontends
from asr_pipeline.features.augment import SpecAugment, WaveformAugment
from asr_pipeline.features.precomputed import (
    FeatureError,
    check_features,
    read_feature_file,
)
from asr_pipeline.io.audio import FFMPEG_ONLY_EXTENSIONS, AudioDecodeError, check_audio_path
from asr_pipeline.io.audio_segment import load_audio_segment, segment_bounds
from asr_pipeline.io.manifests import ManifestRecord, iter_manifest
from asr_pipeline.io.report import SkipReport
from asr_pipeline.text.tokenizer import CTCTokenizer

logger = logging.getLogger(__name__)

AUDIO_INDEX_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("location", pa.string()),
        ("audio_path", pa.string()),
        ("audio_bytes", pa.large_binary()),
        ("features_path", pa.string()),
        ("features", pa.large_list(pa.float32())),
        ("text", pa.string()),
        ("tokens", pa.list_(pa.int32())),
        ("rows", pa.int32()),
        ("cols", pa.int32()),
        ("duration_ms", pa.int32()),
        ("offset_sec", pa.float64()),  # a Kaldi segment of the audio: start, length; null: the whole file
        ("duration_sec", pa.float64()),
    ]
)


# --- frontends ------------------------------------------------------------------------------------------
class Frontend(Protocol):
    """Waveform -> features, and the frame count a waveform length gives (for planning without decoding)."""

    @property
    def sample_rate(self) -> int: ...

    @property
    def feature_dim(self) -> int: ...

    @property
    def frame_shift_ms(self) -> float: ...  # time between output frames: a precomputed frame's duration

    def num_frames(self, num_samples: int) -> int: ...

    def min_samples(self, num_frames: int) -> int: ...  # the fewest samples giving num_frames frames

    def __call__(self, waveform: np.ndarray) -> np.ndarray: ...  # (N,) -> (T, F) float32


@dataclass(frozen=True)
class PlannedFrontend:
    """An architecture's frontend (``features.frontends``) with its frame arithmetic, so batches can be
    planned from audio headers.

    Both frontends start from Kaldi frames: ``1 + (N - window) // shift`` (snip_edges; 0 below one
    window), 400 and 160 samples at 16 kHz. fbank keeps them; w2v-bert stacks pairs, ``T // 2``.
    """

    frontend: frontends.Frontend

    @property
    def sample_rate(self) -> int:
        return self.frontend.sample_rate

    @property
    def feature_dim(self) -> int:
        return self.frontend.feature_dim

    @property
    def frame_shift_ms(self) -> float:
        return self.frontend.frame_shift_ms

    @property
    def _kaldi(self) -> tuple[int, int, int]:  # window and shift in samples, Kaldi frames per output frame
        entry = self.frontend.entry
        options, stack = entry.frame_options(self.frontend.fbank), entry.stack
        rate = options.sample_rate
        return int(rate * options.frame_length_ms / 1000), int(rate * options.frame_shift_ms / 1000), stack

    def num_frames(self, num_samples: int) -> int:
        window, shift, stack = self._kaldi
        return 0 if num_samples < window else (1 + (num_samples - window) // shift) // stack

    def min_samples(self, num_frames: int) -> int:
        window, shift, stack = self._kaldi
        return 0 if num_frames == 0 else window + (num_frames * stack - 1) * shift

    def __call__(self, waveform: np.ndarray) -> np.ndarray:
        return self.frontend(waveform)  # (T, F)


def planned_frontend(kind: str) -> PlannedFrontend:
    """The frontend called ``kind`` (``features.frontends``; an architecture's is its spec's
    ``frontend``) with its default options: fbank-80, w2v-bert-160, ..."""
    return PlannedFrontend(frontends.frontend_named(kind))


# --- the index ------------------------------------------------------------------------------------------
def build_audio_index(
    manifests: Sequence[str | Path],
    frontend: Frontend,
    tokenizer: CTCTokenizer | None,
    report: SkipReport,
) -> pa.Table:
    """One row per usable record of ``manifests`` (module docstring), in manifest order."""
    columns: dict[str, list] = {name: [] for name in AUDIO_INDEX_SCHEMA.names}
    for manifest in manifests:
        for record in iter_manifest(manifest, report, inline_features=True):
            row = _index_row(record, frontend, tokenizer, report)
            if row is None:
                continue
            report.kept += 1
            for name, value in row.items():
                columns[name].append(value)
    return pa.Table.from_pydict(columns, schema=AUDIO_INDEX_SCHEMA)


def _index_row(
    record: ManifestRecord, frontend: Frontend, tokenizer: CTCTokenizer | None, report: SkipReport
) -> dict | None:
    if record.kind is None:
        report.skip(
            "no audio or features", record.location, "expected an audio_path, audio bytes or features"
        )
        return None
    tokens = _tokens(record, tokenizer, report)
    if tokens is None:
        return None
    if record.kind in ("features_inline", "features_file"):
        return _precomputed_row(record, tokens, frontend, tokenizer, report)
    measured = _measure(record, frontend)
    if isinstance(measured, SkippedExample):
        report.skip(measured.reason, record.location, measured.detail)
        return None
    frames, duration_ms = measured
    if frames == 0:
        report.skip("audio shorter than one frame", record.location, f"{duration_ms} ms")
        return None
    return {
        "id": record.id,
        "location": record.location,
        "audio_path": record.audio_path,
        "audio_bytes": record.audio_bytes,
        "features_path": None,
        "features": None,
        "text": _reference_text(record, tokens, tokenizer),
        "tokens": list(tokens),
        "rows": frames,
        "cols": frontend.feature_dim,
        "duration_ms": duration_ms,
        "offset_sec": record.offset_sec,
        "duration_sec": record.duration_sec,
    }


def _precomputed_row(
    record: ManifestRecord,
    tokens: tuple[int, ...],
    frontend: Frontend,
    tokenizer: CTCTokenizer | None,
    report: SkipReport,
) -> dict | None:
    """The index row of a record whose features are given: checked now when inline or of unknown shape."""
    flat: list[float] | None = None
    try:
        if record.kind == "features_inline":
            assert record.features is not None  # read with inline_features=True
            features = check_features(record.features, frontend.feature_dim)  # (T, F)
            rows, flat = features.shape[0], features.reshape(-1).tolist()
        elif record.rows is None or record.cols is None:
            assert record.features_path is not None
            features = read_feature_file(Path(record.features_path))
            rows = check_features(features, frontend.feature_dim).shape[0]
        else:
            if not Path(record.features_path).is_file():
                raise FeatureError("missing file", f"feature file {record.features_path} not found")
            if record.cols != frontend.feature_dim:
                raise FeatureError(
                    "feature width differs from input_dim",
                    f"cols={record.cols}, but the model input is {frontend.feature_dim} wide",
                )
            rows = record.rows
    except FeatureError as error:
        report.skip(error.reason, record.location, error.detail)
        return None
    return {
        "id": record.id,
        "location": record.location,
        "audio_path": None,
        "audio_bytes": None,
        "features_path": record.features_path if flat is None else None,
        "features": flat,
        "text": _reference_text(record, tokens, tokenizer),
        "tokens": list(tokens),
        "rows": rows,
        "cols": frontend.feature_dim,
        "duration_ms": round(rows * frontend.frame_shift_ms),
        "offset_sec": None,
        "duration_sec": None,
    }


def _reference_text(record: ManifestRecord, tokens: tuple[int, ...], tokenizer: CTCTokenizer | None) -> str:
    """The transcript CER/WER compare against: the record's text, else its tokens decoded (or spelled out)."""
    if record.text is not None:
        return record.text
    return tokenizer.decode(tokens) if tokenizer is not None else " ".join(map(str, tokens))


def _tokens(
    record: ManifestRecord, tokenizer: CTCTokenizer | None, report: SkipReport
) -> tuple[int, ...] | None:
    if record.tokens is not None:
        tokens = record.tokens
    elif record.text is None:
        report.skip("no text and no tokens", record.location)
        return None
    elif tokenizer is None:
        report.skip(
            "text but no tokens, and no tokenizer", record.location, "give the run a tokenizer (--tokenizer)"
        )
        return None
    else:
        tokens = tuple(tokenizer.encode(record.text))
    if not tokens:
        report.skip("no tokens", record.location, "the transcript encodes to no tokens")
        return None
    if tokenizer is not None:
        bad = [t for t in tokens if not 0 <= t < tokenizer.vocab_size or t == tokenizer.blank_id]
        if bad:
            report.skip(
                "token id outside the vocabulary",
                record.location,
                f"{bad[:5]} not in [0, {tokenizer.vocab_size}) minus blank {tokenizer.blank_id}",
            )
            return None
    return tokens


def _measure(record: ManifestRecord, frontend: Frontend) -> tuple[int, int] | SkippedExample:
    """(frames T, duration in ms) without decoding when the manifest or the audio header tells; of the
    record's segment (Kaldi ``segments``) when it has one."""
    rate = frontend.sample_rate
    if record.rows is not None:
        return record.rows, round(1000 * frontend.min_samples(record.rows) / rate)
    source = record.audio_bytes if record.audio_bytes is not None else record.audio_path
    assert source is not None
    suffix = Path(record.audio_path).suffix.lower() if record.audio_path else ""
    if not isinstance(source, bytes):
        try:  # before soundfile.info, which blocks forever on a FIFO
            check_audio_path(source)
        except AudioDecodeError as error:
            return SkippedExample(record.id, record.location, error.reason, str(error))
    if suffix not in FFMPEG_ONLY_EXTENSIONS:
        try:
            info = soundfile.info(io.BytesIO(source) if isinstance(source, bytes) else source)
        except (soundfile.LibsndfileError, RuntimeError, OSError, TypeError):
            info = None  # ffmpeg may still read it: measured by decoding below
        if info is not None and info.frames > 0 and info.samplerate > 0:
            try:
                start, stop = segment_bounds(
                    info.frames, info.samplerate, record.offset_sec, record.duration_sec, record.location
                )
            except AudioDecodeError as error:
                return SkippedExample(record.id, record.location, error.reason, str(error))
            frames = stop - start
            resampled = frames if info.samplerate == rate else math.ceil(frames * rate / info.samplerate)
            return frontend.num_frames(resampled), round(1000 * frames / info.samplerate)
    try:
        waveform = load_audio_segment(source, rate, record.offset_sec, record.duration_sec)  # (N,)
    except AudioDecodeError as error:
        return SkippedExample(record.id, record.location, error.reason, str(error))
    return frontend.num_frames(len(waveform)), round(1000 * len(waveform) / rate)


# --- the dataset ----------------------------------------------------------------------------------------
class AudioDataset(Dataset):
    """Examples of an audio index, decoded and featurized per item (module docstring)."""

    def __init__(
        self,
        index: pa.Table,
        frontend: Frontend,
        *,
        waveform_augment: WaveformAugment | None = None,
        spec_augment: SpecAugment | None = None,
        seed: int = 0,
        spec_augment_for_epoch: Callable[[int], SpecAugment] | None = None,
    ) -> None:
        self.index = index
        self.frontend = frontend
        self.waveform_augment = waveform_augment if waveform_augment and waveform_augment.active else None
        self.spec_augment = spec_augment
        # Training control (training.epoch_schedule): the epoch's SpecAugment, in place of spec_augment.
        self.spec_augment_for_epoch = spec_augment_for_epoch
        self.seed = seed
        self.num_frames = index.column("rows").to_numpy().astype(np.int64)  # T per item, for samplers
        self.num_tokens = np.array([len(t) for t in index.column("tokens").to_pylist()], dtype=np.int64)
        self.duration_ms = index.column("duration_ms").to_numpy().astype(np.int64)

    def __len__(self) -> int:
        return self.index.num_rows

    def __getitem__(self, key: int | tuple[int, int]) -> dict | SkippedExample:
        epoch, item = key if isinstance(key, tuple) else (None, key)
        if epoch is None and (self.waveform_augment or self.spec_augment or self.spec_augment_for_epoch):
            raise ValueError(
                "an augmenting AudioDataset needs (epoch, index) keys: use EpochTaggedBatchSampler"
            )
        row = {name: self.index.column(name)[item].as_py() for name in AUDIO_INDEX_SCHEMA.names}
        if row["features"] is not None or row["features_path"] is not None:
            # Precomputed: no waveform, so no waveform augmentation; SpecAugment below still applies.
            try:
                features = torch.from_numpy(self._precomputed(row))  # (T, F)
            except FeatureError as error:
                return SkippedExample(row["id"], row["location"], error.reason, error.detail)
        else:
            source = row["audio_bytes"] if row["audio_bytes"] is not None else row["audio_path"]
            try:
                waveform = load_audio_segment(  # (N,)
                    source, self.frontend.sample_rate, row["offset_sec"], row["duration_sec"]
                )
            except AudioDecodeError as error:  # its reason: undecodable, missing, non-finite samples, ...
                return SkippedExample(row["id"], row["location"], error.reason, str(error))
            if epoch is not None and self.waveform_augment is not None:
                waveform = self.waveform_augment(waveform, np.random.default_rng([self.seed, epoch, item, 0]))
            features = torch.from_numpy(np.ascontiguousarray(self.frontend(waveform)))  # (T, F)
        if features.shape[0] == 0:
            return SkippedExample(row["id"], row["location"], "audio shorter than one frame")
        spec_augment = self.spec_augment
        if epoch is not None and self.spec_augment_for_epoch is not None:
            spec_augment = self.spec_augment_for_epoch(epoch)
        if epoch is not None and spec_augment is not None:
            generator = torch.Generator().manual_seed(_seed64(self.seed, epoch, item))
            features = spec_augment(features, generator)
        return {
            "id": row["id"],
            "features": features,
            "tokens": torch.tensor(row["tokens"], dtype=torch.int64),  # (U,)
            "text": row["text"],
            "duration_ms": int(row["duration_ms"]),
        }

    def _precomputed(self, row: dict) -> np.ndarray:
        """(T, F) float32 of a precomputed row; a feature file is read and checked here, every time."""
        if row["features"] is not None:
            return np.asarray(row["features"], dtype=np.float32).reshape(row["rows"], row["cols"])
        features = read_feature_file(Path(row["features_path"]), row["rows"], row["cols"])
        return check_features(features, self.frontend.feature_dim)


def _seed64(*keys: int) -> int:
    return int(np.random.SeedSequence([*keys, 1]).generate_state(1, np.uint64)[0])


class EpochTaggedBatchSampler(Sampler[list[tuple[int, int]]]):
    """Yields the batches of ``sampler`` as ``(epoch, index)`` pairs (module docstring)."""

    def __init__(self, sampler: LengthBucketedBatchSampler) -> None:
        self.sampler = sampler

    def __iter__(self) -> Iterator[list[tuple[int, int]]]:
        epoch = self.sampler.epoch
        for batch in self.sampler:
            yield [(epoch, index) for index in batch]

    def __len__(self) -> int:
        return len(self.sampler)


__all__ = [
    "AUDIO_INDEX_SCHEMA",
    "AudioDataset",
    "EpochTaggedBatchSampler",
    "Frontend",
    "PlannedFrontend",
    "build_audio_index",
    "planned_frontend",
]
