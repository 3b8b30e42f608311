"""Nodes of the `features` stage."""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl

from asr_pipeline.features.split import stream_split_shards
from asr_pipeline.io.datasets import ShardChunk
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
    yield from stream_split_shards(manifest, tokenizer, options)


def extract_optional_features(
    manifest: pl.DataFrame,
    tokenizer_model: bytes,
    params: dict,
    tokenizer_params: dict,
    train_architecture: str | None = None,
) -> Iterator[tuple[ShardChunk, dict]]:
    """``extract_features`` for a split a corpus may lack (the open test set): a manifest without rows
    (``paths.raw_test_open: null``) writes one shard without rows instead of failing, so `evaluate` runs on it
    and reports 0 utterances."""
    options = extraction_options({**params, "augmentation": None}, train_architecture)  # as test's
    tokenizer = CTCTokenizer(tokenizer_model, blank_id=int(tokenizer_params.get("blank_id", 0)))
    yield from stream_split_shards(manifest, tokenizer, options, optional=True)
