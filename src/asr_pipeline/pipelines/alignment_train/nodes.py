"""The ``train_ce@<iteration>`` stage of the alignment recipe: a frame-wise model on the iteration's alignment
(layout and params: ``training.alignment_iterations``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from asr_pipeline.training.alignment_iterations import ALIGNMENT_FILE, alignment_iteration
from asr_pipeline.training.config import deep_merge
from asr_pipeline.training.stage_run import train_in_run_dir


def train_iteration(
    train_shards: list[str],
    val_shards: list[str],
    length_index: pl.DataFrame,
    tokenizer_model: bytes,
    alignment_dir: Path,
    train_params: dict[str, Any],
    params: dict[str, Any],
) -> None:
    """Train the iteration's frame-wise model on its alignment (its metrics: ``run/metrics.json``)."""
    name, iteration = alignment_iteration(params)
    run_dir = alignment_dir / name / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    merged = deep_merge(train_params, iteration.get("train") or {})
    merged["data"] = {
        **merged.get("data", {}),
        "alignment": str(alignment_dir / name / "alignment" / ALIGNMENT_FILE),
    }
    train_in_run_dir(train_shards, val_shards, length_index, tokenizer_model, run_dir, merged)
