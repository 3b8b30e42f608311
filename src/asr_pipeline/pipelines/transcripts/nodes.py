"""Nodes of the `transcripts` stage."""

from __future__ import annotations

import polars as pl

from asr_pipeline.io.datasets import Manifest
from asr_pipeline.io.report import SkipReport
from asr_pipeline.text.normalize import NormalizationOptions, normalize_text

MANIFEST_SCHEMA = {
    "id": pl.String,
    "location": pl.String,
    "audio_path": pl.String,
    "text": pl.String,
    "tokens": pl.List(pl.Int32),
}


def normalize_manifest(raw_manifest: Manifest, params: dict) -> tuple[pl.DataFrame, dict]:
    """Read one split's raw manifest, normalize its transcripts, and count what had to be skipped.

    Columns: id, location (file:line of the source record), audio_path, text (normalized), tokens.
    Skipped (or, with ``strict: true``, rejected): duplicate ids, records with neither audio nor
    features, records with neither text nor tokens, and transcripts empty after normalization.
    """
    options = NormalizationOptions.from_dict(params.get("normalization"))
    report = SkipReport(strict=bool(params.get("strict", False)))
    rows: dict[str, list] = {name: [] for name in MANIFEST_SCHEMA}
    seen_ids: dict[str, str] = {}
    for record in raw_manifest.records(report):
        if record.id in seen_ids:
            report.skip("duplicate id", record.location, f"{record.id!r} first seen at {seen_ids[record.id]}")
            continue
        if record.audio_path is None:
            if record.audio_bytes is not None or record.features_path or record.has_inline_features:
                # Readable by io.manifests, but the features stage extracts from audio files only so far.
                report.skip(
                    "embedded audio or precomputed features (not supported by the stages yet)",
                    record.location,
                    "use audio files, or extract with asr-pipeline extract-features",
                )
            else:
                report.skip("no audio", record.location, "expected an audio_path (or an audio file)")
            continue
        text = normalize_text(record.text, options) if record.text is not None else None
        if not text and record.tokens is None:
            report.skip("empty transcript", record.location)
            continue
        seen_ids[record.id] = record.location
        rows["id"].append(record.id)
        rows["location"].append(record.location)
        rows["audio_path"].append(record.audio_path)
        rows["text"].append(text or "")
        rows["tokens"].append(list(record.tokens) if record.tokens is not None else None)
        report.kept += 1
    return pl.DataFrame(rows, schema=MANIFEST_SCHEMA), report.to_dict()


def build_tokenizer_corpus(train_manifest: pl.DataFrame) -> str:
    """One normalized training transcript per line: the SentencePiece and KenLM training text."""
    lines = [text for text in train_manifest["text"].to_list() if text]
    if not lines:
        raise ValueError("the training manifest has no transcripts to train a tokenizer on")
    return "\n".join(lines) + "\n"
