"""Extraction options: the named frontend, the feature width contract, the storage dtype, and the
per-row observer behind ``extract-features --tui``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from asr_pipeline.features.extract import (
    AudioOutcome,
    ExtractionOptions,
    batch_into_shards,
    extract_records,
)
from asr_pipeline.io.report import SkipReport
from asr_pipeline.io.shards import iter_examples, shard_name, write_shard
from asr_pipeline.text.tokenizer import CTCTokenizer
from tests.conftest import TINY_SENTENCES, make_wav


@pytest.fixture(scope="module")
def tokenizer(spm_model: bytes) -> CTCTokenizer:
    return CTCTokenizer(spm_model)


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """1.0 s and 0.5 s tones at 22.05 kHz, a 2 s one (too long at max 1.5 s) and a missing file."""
    folder = tmp_path_factory.mktemp("audio")
    made = []
    for i, seconds in enumerate([1.0, 0.5, 2.0, None]):
        path = folder / f"utt{i}.wav"
        if seconds is not None:
            path.write_bytes(make_wav(seconds=seconds, freq=300.0 + 50 * i))
        made.append(
            {
                "id": f"utt{i}",
                "location": f"m.jsonl:{i + 1}",
                "audio_path": str(path),
                "text": TINY_SENTENCES[i],
            }
        )
    return made


def extract(rows: list[dict], tokenizer: CTCTokenizer, **options) -> tuple[list[dict], SkipReport]:
    report = SkipReport()
    opts = ExtractionOptions.from_dict({"max_audio_duration_sec": 1.5, **options})
    return list(extract_records(rows, tokenizer, opts, report)), report


def test_w2v_bert_architecture_writes_160_dim_frames_of_20_ms(rows, tokenizer):
    records, report = extract(rows, tokenizer, frontend_name="w2v-bert")

    # 1.0 s at 16 kHz: 98 Kaldi frames -> 49 stacked; 0.5 s: 48 -> 24
    assert [r["features"].shape for r in records] == [(49, 160), (24, 160)]
    assert (report.kept, dict(report.counts)) == (
        2,
        {"longer than max_audio_duration_sec": 1, "missing file": 1},
    )


@pytest.mark.parametrize(("frontend_name", "width"), [("fbank", 80), ("w2v-bert", 160), ("mfcc", 39)])
def test_feature_dim_is_the_frontends_width_unless_input_dim_is_given(frontend_name, width):
    assert ExtractionOptions(frontend_name=frontend_name).feature_dim == width
    assert ExtractionOptions(frontend_name=frontend_name, input_dim=7).feature_dim == 7


def test_an_input_dim_the_frontend_cannot_make_stops_at_the_first_audio_row(rows, tokenizer):
    with pytest.raises(
        ValueError, match=r"m\.jsonl:1: the w2v-bert frontend makes 160-dim features but input_dim is 80"
    ):
        extract(rows, tokenizer, frontend_name="w2v-bert", input_dim=80)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"frontend_name": "conformer"},
            "frontend_name must be one of fbank, w2v-bert, waveform, mfcc, got 'conformer'",
        ),
        ({"feature_dtype": "bfloat16"}, "feature_dtype must be one of float32, float16, got 'bfloat16'"),
        ({"input_dim": 0}, "input_dim must be >= 1 or null, got 0"),
        ({"shard_size": 0}, "shard_size must be >= 1, got 0"),
    ],
)
def test_bad_options_are_rejected_naming_the_params_key(values, message):
    with pytest.raises(ValueError, match=f"params.yaml features: {message}"):
        ExtractionOptions.from_dict(values)


def test_float16_shards_hold_the_float32_features_rounded_to_half(rows, tokenizer, tmp_path: Path):
    records, _ = extract(rows, tokenizer)
    path = tmp_path / shard_name(0)

    (table,) = batch_into_shards(records, shard_size=8, feature_dtype="float16")
    write_shard(table, path)

    assert pq.read_schema(path).field("features").type.value_type == pa.float16()  # stored as FLOAT16
    read = list(iter_examples(path))
    for original, example in zip(records, read, strict=True):
        assert example["features"].dtype == np.float32
        np.testing.assert_array_equal(
            example["features"], original["features"].astype(np.float16).astype(np.float32)
        )


def test_the_row_observer_sees_every_row_with_its_record_or_none(rows, tokenizer):
    seen: list[tuple[str, str | None, str | None, int, int]] = []
    report = SkipReport()
    options = ExtractionOptions(max_audio_duration_sec=1.5)

    def observe(row: dict, audio: AudioOutcome, record: dict | None, so_far: SkipReport) -> None:
        seen.append(
            (row["id"], audio.skip_reason, record["id"] if record else None, so_far.seen, so_far.kept)
        )

    list(extract_records(rows, tokenizer, options, report, on_row=observe))

    assert seen == [
        ("utt0", None, "utt0", 1, 1),
        ("utt1", None, "utt1", 2, 2),
        ("utt2", "longer than max_audio_duration_sec", None, 3, 2),
        ("utt3", "missing file", None, 4, 2),
    ]
