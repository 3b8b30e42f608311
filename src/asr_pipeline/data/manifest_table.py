"""One split's raw manifest -> the normalized manifest table every later stage reads (MANIFEST_SCHEMA), with
what had to be skipped counted."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from asr_pipeline.io.datasets import Manifest
from asr_pipeline.io.manifests import ManifestRecord
from asr_pipeline.io.report import SkipReport
from asr_pipeline.text.normalize import NormalizationOptions, normalize_text

# One row per usable record. Payloads (embedded audio bytes, inline features) are deliberately not copied
# here: the manifest stays small and streams; the features stage re-reads them from `source` at `location`
# (features/precomputed.py attach_payloads).
MANIFEST_SCHEMA = {
    "id": pl.String,
    "location": pl.String,  # file:line or file:row N of the raw record, for messages and payload lookup
    "source": pl.String,  # the raw manifest file (or audio folder) the record came from
    "kind": pl.String,  # audio_file | audio_bytes | features_inline | features_file (ManifestRecord.kind)
    "audio_path": pl.String,  # audio_file only
    "features_path": pl.String,  # features_file only
    "rows": pl.Int32,  # feature frames (T) when the manifest says; a frame-count hint for audio
    "cols": pl.Int32,  # feature width (F) when the manifest says
    "text": pl.String,  # normalized; "" when the record has tokens only
    "tokens": pl.List(pl.Int32),  # null: tokenized by the features stage with the trained tokenizer
    "offset_sec": pl.Float64,  # a segment of the audio file (Kaldi `segments`): its start; null: the whole file
    "duration_sec": pl.Float64,  # and its length; null: to the end of the file
}


# The skip reason of an audio or feature file outside paths.corpus (README, "Train on your own data").
OUTSIDE_CORPUS = "outside the corpus folder"


def normalize_manifest_records(
    raw_manifest: Manifest, options: NormalizationOptions, strict: bool = False
) -> tuple[pl.DataFrame, dict]:
    """Read one split's raw manifest, normalize its transcripts with ``options``, and count what had to be
    skipped (the transcripts stage's node and ``asr-pipeline extract-features`` both read manifests so).

    Every record form is kept (audio files, embedded audio, inline features, feature files; see
    MANIFEST_SCHEMA). Skipped (or, with ``strict: true``, rejected naming file and line): unreadable
    records (counted by the readers), duplicate ids, records with neither audio nor features, audio or
    feature files outside the manifest's ``corpus`` folder (``../``, absolute paths, symlinks out: the
    stages depend on that folder, so DVC would not see such a file change), and records with neither
    tokens nor a transcript that is non-empty after normalization.
    """
    report = SkipReport(strict=strict)
    rows: dict[str, list] = {name: [] for name in MANIFEST_SCHEMA}
    seen_ids: dict[str, str] = {}
    for record in raw_manifest.records(report):
        if record.id in seen_ids:
            report.skip("duplicate id", record.location, f"{record.id!r} first seen at {seen_ids[record.id]}")
            continue
        kind = record.kind
        if kind is None:
            report.skip(
                "no audio or features",
                record.location,
                "expected audio_path, audio bytes, features or features_path",
            )
            continue
        outside = _outside_corpus(record, raw_manifest.corpus)
        if outside is not None:
            report.skip(OUTSIDE_CORPUS, record.location, outside)
            continue
        text = normalize_text(record.text, options) if record.text is not None else None
        if not text and record.tokens is None:
            report.skip("empty transcript", record.location, "no tokens and no text left after normalization")
            continue
        seen_ids[record.id] = record.location
        values = {
            "id": record.id,
            "location": record.location,
            "source": record.source,
            "kind": kind,
            "audio_path": record.audio_path if kind == "audio_file" else None,
            "features_path": record.features_path if kind == "features_file" else None,
            "rows": record.rows,
            "cols": record.cols,
            "text": text or "",
            "tokens": list(record.tokens) if record.tokens is not None else None,
            "offset_sec": record.offset_sec,
            "duration_sec": record.duration_sec,
        }
        for name, value in values.items():
            rows[name].append(value)
        report.kept += 1
    return pl.DataFrame(rows, schema=MANIFEST_SCHEMA), report.to_dict()


def _outside_corpus(record: ManifestRecord, corpus: Path | None) -> str | None:
    """Where the file ``record`` is read from (its audio or feature file) lies outside ``corpus`` (symlinks
    followed): what to say; None when inside, or for embedded audio and inline features."""
    path = {"audio_file": record.audio_path, "features_file": record.features_path}.get(record.kind or "")
    if corpus is not None and path is not None:
        folder = corpus.resolve()
        resolved = Path(path).resolve()
        if resolved != folder and folder not in resolved.parents:
            return (
                f"{path} is {resolved}, outside paths.corpus={corpus} (conf/base/globals.yml), so DVC would "
                "not see it change; move or copy the file under the corpus folder"
            )
    return None
