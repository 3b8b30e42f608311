"""Nodes of the `index` stage."""

from __future__ import annotations

import polars as pl

from asr_pipeline.data.length_index import build_length_index


def index_feature_shards(train_shards: list[str], dev_shards: list[str]) -> pl.DataFrame:
    """One row per example of the training and validation shards: shard, shard_fingerprint, row, rows,
    cols, tokens, duration_ms. Reads only the metadata columns of each shard, never the features.
    """
    return pl.from_arrow(build_length_index([*train_shards, *dev_shards]))
