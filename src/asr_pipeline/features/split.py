"""One split's manifest -> its feature shards, streamed with the report so far (the features and conditions
stages, the phone aligner's and fine-tuning's featurized parts)."""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl

from asr_pipeline.features.extract import ExtractionOptions, batch_into_shards, extract_records
from asr_pipeline.io.datasets import ShardChunk
from asr_pipeline.io.report import SkipReport
from asr_pipeline.io.shards import records_to_table
from asr_pipeline.text.tokenizer import CTCTokenizer


def stream_split_shards(
    manifest: pl.DataFrame, tokenizer: CTCTokenizer, options: ExtractionOptions, optional: bool = False
) -> Iterator[tuple[ShardChunk, dict]]:
    """Yields (shard, report so far) so Kedro saves shard by shard; the report yielded last is complete:
    kept/skipped counts by reason, kept utterances with <unk> pieces (``kept_with``), frames, shards and total
    audio duration. A split whose every record is skipped raises ``NothingKeptError`` (naming the skips)
    instead of writing an empty shard. ``optional`` (a split a corpus may lack, pipelines.splits
    OPTIONAL_SPLITS): a manifest without rows writes one shard without rows, so the stages after it run
    and report 0 utterances; a manifest whose rows were all skipped still raises."""
    report = SkipReport(strict=options.strict)
    totals = {"frames": 0, "duration_ms": 0, "shards": 0}
    if optional and manifest.height == 0:
        totals["shards"] = 1
        yield ShardChunk(0, records_to_table([], options.feature_dtype)), _summary(report, totals)
        return
    records = extract_records(
        manifest.iter_rows(named=True), tokenizer, options, report, total=manifest.height
    )
    for index, table in enumerate(batch_into_shards(records, options.shard_size, options.feature_dtype)):
        totals["frames"] += int(pl.from_arrow(table.select(["rows"]))["rows"].sum())
        totals["duration_ms"] += int(pl.from_arrow(table.select(["duration_ms"]))["duration_ms"].sum())
        totals["shards"] = index + 1
        yield ShardChunk(index, table), _summary(report, totals)


def condition_mix(name: str, condition: dict, seed: int) -> dict:
    """params.yaml ``conditions.<name>`` (an ``augment.Condition``) as the one-condition augmentation mix that
    puts every utterance under it, draws seeded by (``seed``, utterance id)."""
    return {"seed": seed, "conditions": [{"name": name, "weight": 1.0, **condition}]}


def _summary(report: SkipReport, totals: dict) -> dict:
    return {**report.to_dict(), **totals, "hours": round(totals["duration_ms"] / 3.6e6, 4)}
