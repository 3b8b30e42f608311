"""data.manifest_table: a raw manifest becomes the normalized table (one row per usable record, its transcript
normalized), and what cannot be used is skipped and counted by reason, or rejected with strict."""

from __future__ import annotations

import json

import pytest

from asr_pipeline.data.manifest_table import MANIFEST_SCHEMA, OUTSIDE_CORPUS, normalize_manifest_records
from asr_pipeline.io.datasets import Manifest
from asr_pipeline.text.normalize import NormalizationOptions


def jsonl(path, records: list[dict]):
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def test_records_are_normalized_into_the_schema_and_skips_are_counted_by_reason(tmp_path):
    (tmp_path / "corpus").mkdir()
    manifest = jsonl(
        tmp_path / "corpus" / "train.jsonl",
        [
            {"id": "a", "audio_path": "a.wav", "text": "Hello, World!"},
            {"id": "b", "audio_path": "b.wav", "tokens": [3, 4]},  # tokens only: kept, text ""
            {"id": "a", "audio_path": "c.wav", "text": "again"},  # duplicate id
            {"id": "d", "text": "no audio"},
            {"id": "e", "audio_path": "e.wav", "text": "?!"},  # nothing left after normalization
            {"id": "f", "audio_path": "../f.wav", "text": "out"},
        ],
    )
    table, report = normalize_manifest_records(
        Manifest(manifest, corpus=tmp_path / "corpus"), NormalizationOptions()
    )
    assert dict(table.schema) == MANIFEST_SCHEMA
    assert table["id"].to_list() == ["a", "b"]
    assert table["text"].to_list() == ["hello world", ""]
    assert table["tokens"].to_list() == [None, [3, 4]]
    assert table["kind"].to_list() == ["audio_file", "audio_file"]
    assert table["location"][0].endswith("train.jsonl:1")
    assert (report["kept"], report["skipped"]) == (2, 4)
    assert report["skipped_by_reason"] == {
        "duplicate id": 1,
        "empty transcript": 1,
        "no audio or features": 1,
        OUTSIDE_CORPUS: 1,
    }


def test_without_a_corpus_folder_any_audio_path_is_kept(tmp_path):
    manifest = jsonl(tmp_path / "m.jsonl", [{"id": "f", "audio_path": "/elsewhere/f.wav", "text": "out"}])
    table, report = normalize_manifest_records(Manifest(manifest), NormalizationOptions())
    assert table["audio_path"].to_list() == ["/elsewhere/f.wav"] and report["skipped"] == 0


def test_normalization_follows_its_options(tmp_path):
    manifest = jsonl(tmp_path / "m.jsonl", [{"id": "a", "audio_path": "a.wav", "text": "Hello, World!"}])
    options = NormalizationOptions(lowercase=False, strip_punctuation=False)
    table, _ = normalize_manifest_records(Manifest(manifest), options)
    assert table["text"].to_list() == ["Hello, World!"]


def test_strict_rejects_the_first_skipped_record_naming_its_line(tmp_path):
    manifest = jsonl(tmp_path / "m.jsonl", [{"id": "a", "audio_path": "a.wav", "text": "ok"}, {"id": "b"}])
    with pytest.raises(ValueError, match=r"m.jsonl:2"):
        normalize_manifest_records(Manifest(manifest), NormalizationOptions(), strict=True)
