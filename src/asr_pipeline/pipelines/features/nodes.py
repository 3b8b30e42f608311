"""Nodes of the `features` stage."""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl

from asr_pipeline.features.extract import batch_into_shards, extract_records
from asr_pipeline.io.datasets import ShardChunk
from asr_pipeline.io.report import SkipReport
from asr_pipeline.models.feature_options import extraction_options
from asr_pipeline.text.tokenizer import CTCTokenizer


def extract_features(
    manifest: pl.DataFrame,
    tokenizer_model: bytes,
    params: dict,
    tokenizer_params: dict,
    train_architecture: str | None = None,
    augmentation: dict | None = None,
) -> Iterator[tuple[ShardChunk, dict]]:
    """Stream one split into shards: yields (shard, report so far) so Kedro saves shard by shard.

    The report saved last is complete: kept/skipped counts by reason, kept utterances with <unk> pieces
    (``kept_with``) and total audio duration. ``params`` is params.yaml ``features`` (``ExtractionOptions``):
    ``architecture`` picks the frontend (null: ``train_architecture``, params.yaml
    ``train.model.architecture``, so the model's frontend is chosen with it), ``feature_dtype`` the shard
    storage dtype. A split whose every record is skipped fails the node (``NothingKeptError``, naming the
    skips) instead of writing an empty shard. ``augmentation`` (params.yaml ``augmentation``, train only;
    ``augment.AugmentationMix``) transforms each utterance's audio by the condition drawn for its id; the
    report counts each condition (``kept_with``).
    """
    options = extraction_options({**params, "augmentation": augmentation}, train_architecture)
    tokenizer = CTCTokenizer(tokenizer_model, blank_id=int(tokenizer_params.get("blank_id", 0)))
    report = SkipReport(strict=options.strict)
    totals = {"frames": 0, "duration_ms": 0, "shards": 0}
    records = extract_records(
        manifest.iter_rows(named=True), tokenizer, options, report, total=manifest.height
    )
    for index, table in enumerate(batch_into_shards(records, options.shard_size, options.feature_dtype)):
        totals["frames"] += int(pl.from_arrow(table.select(["rows"]))["rows"].sum())
        totals["duration_ms"] += int(pl.from_arrow(table.select(["duration_ms"]))["duration_ms"].sum())
        totals["shards"] = index + 1
        yield ShardChunk(index, table), _summary(report, totals)


def _summary(report: SkipReport, totals: dict) -> dict:
    return {**report.to_dict(), **totals, "hours": round(totals["duration_ms"] / 3.6e6, 4)}
