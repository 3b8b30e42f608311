"""Nodes of the `conditions` stage."""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl

from asr_pipeline.features.split import condition_mix, stream_split_shards
from asr_pipeline.io.datasets import ShardChunk
from asr_pipeline.models.feature_options import extraction_options
from asr_pipeline.text.tokenizer import CTCTokenizer


def extract_condition_features(
    manifest: pl.DataFrame,
    tokenizer_model: bytes,
    params: dict,
    tokenizer_params: dict,
    train_architecture: str | None,
    condition: dict,
    seed: int,
    name: str,
) -> Iterator[tuple[ShardChunk, dict]]:
    """An evaluation condition split: every utterance of ``manifest`` under one condition (params.yaml
    ``conditions.<name>``, an ``augment.Condition``), random draws seeded by (``seed``, utterance id)."""
    options = extraction_options(
        {**params, "augmentation": condition_mix(name, condition, seed)}, train_architecture
    )
    tokenizer = CTCTokenizer(tokenizer_model, blank_id=int(tokenizer_params.get("blank_id", 0)))
    yield from stream_split_shards(manifest, tokenizer, options)
