"""Nodes of the `train` stage.

The node only resolves a config and launches ``torchrun`` (``training.stage_run``); the worker
(training/worker.py) never imports Kedro, so the same training runs from the CLI, from torchrun directly or
on a cluster.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from asr_pipeline.training.stage_run import train_in_run_dir


def train_model(
    train_shards: list[str],
    val_shards: list[str],
    length_index: pl.DataFrame,
    tokenizer_model: bytes,
    run_dir: Path,
    params: dict,
) -> tuple[dict, Path]:
    """Train in ``run_dir`` (from the catalog, see ``training.stage_run.train_in_run_dir``); return the run's
    final metrics and the trained run dir."""
    return train_in_run_dir(train_shards, val_shards, length_index, tokenizer_model, run_dir, params), run_dir
