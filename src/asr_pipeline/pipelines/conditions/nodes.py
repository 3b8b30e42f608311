"""Nodes of the `conditions` stage."""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl

from asr_pipeline.io.datasets import ShardChunk
from asr_pipeline.pipelines.features.nodes import extract_features


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
    mix = {"seed": seed, "conditions": [{"name": name, "weight": 1.0, **condition}]}
    yield from extract_features(manifest, tokenizer_model, params, tokenizer_params, train_architecture, mix)
