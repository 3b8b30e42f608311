"""Nodes of the `transcripts` stage."""

from __future__ import annotations

import polars as pl

from asr_pipeline.data.manifest_table import normalize_manifest_records
from asr_pipeline.io.datasets import Manifest
from asr_pipeline.text.normalize import NormalizationOptions


def normalize_manifest(raw_manifest: Manifest, params: dict) -> tuple[pl.DataFrame, dict]:
    """One split's raw manifest normalized (``data.manifest_table``): params.yaml ``transcripts``
    ``normalization`` and ``strict`` (reject naming file and line instead of skipping and counting)."""
    options = NormalizationOptions.from_dict(params.get("normalization"))
    return normalize_manifest_records(raw_manifest, options, strict=bool(params.get("strict", False)))


def build_tokenizer_corpus(train_manifest: pl.DataFrame) -> str:
    """One normalized training transcript per line: the SentencePiece and KenLM training text."""
    lines = [text for text in train_manifest["text"].to_list() if text]
    if not lines:
        raise ValueError("the training manifest has no transcripts to train a tokenizer on")
    return "\n".join(lines) + "\n"
