"""Manifest rows -> feature shard tables: decode, resample, fbank, tokenize; bad rows counted."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import pyarrow as pa
from tqdm import tqdm

from asr_pipeline.features.fbank import FbankOptions, compute_fbank
from asr_pipeline.io.audio import AudioDecodeError, load_audio
from asr_pipeline.io.report import SkipReport
from asr_pipeline.io.shards import records_to_table
from asr_pipeline.options import options_from_dict
from asr_pipeline.text.tokenizer import CTCTokenizer


@dataclass(frozen=True)
class ExtractionOptions:
    fbank: FbankOptions = field(default_factory=FbankOptions)
    shard_size: int = 512  # examples per shard: fewer, larger files keep DVC fast
    max_audio_duration_sec: float | None = 30.0
    strict: bool = False

    @classmethod
    def from_dict(cls, values: dict | None) -> ExtractionOptions:
        values = dict(values or {})
        values["fbank"] = FbankOptions.from_dict(values.get("fbank"))
        options = options_from_dict(cls, values, "params.yaml features")
        if options.shard_size < 1:
            raise ValueError(f"params.yaml features: shard_size must be >= 1, got {options.shard_size}")
        return options


def extract_records(
    rows: Iterable[dict],
    tokenizer: CTCTokenizer,
    options: ExtractionOptions,
    report: SkipReport,
    total: int | None = None,
    desc: str = "features",
) -> Iterator[dict]:
    """Yield shard records (features as (T, F)) for manifest rows, skipping and counting bad ones."""
    sample_rate = options.fbank.sample_rate
    for row in tqdm(rows, total=total, desc=desc, unit="utt", mininterval=2.0):
        report.seen += 1
        location = row["location"]
        try:
            waveform = load_audio(row["audio_path"], sample_rate)
        except AudioDecodeError as error:
            report.skip("undecodable audio", location, str(error))
            continue
        duration_ms = round(1000 * waveform.shape[0] / sample_rate)
        if options.max_audio_duration_sec is not None and duration_ms > 1000 * options.max_audio_duration_sec:
            report.skip("longer than max_audio_duration_sec", location, f"{duration_ms} ms")
            continue
        if not waveform.any():
            report.skip("silent audio", location)
            continue
        features = compute_fbank(waveform, options.fbank)
        if features.shape[0] == 0:
            report.skip("audio shorter than one frame", location, f"{duration_ms} ms")
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
            "features": features,
            "tokens": tokens,
            "duration_ms": duration_ms,
            "text": row["text"],
        }


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
