"""A training run from a pipeline stage: the shards, the length index and tokenizer, and params.yaml
``train``-shaped params, resolved into one config and launched under torchrun in a self-contained run dir
(the train, train_ce and other training stages call it)."""

from __future__ import annotations

import io
from pathlib import Path

import polars as pl

from asr_pipeline.run_layout import INDEX_FILE, TOKENIZER_FILE
from asr_pipeline.training.config import resolve_config
from asr_pipeline.training.launch import launch_options, run_training


def train_in_run_dir(
    train_shards: list[str],
    val_shards: list[str],
    length_index: pl.DataFrame,
    tokenizer_model: bytes,
    run_dir: Path,
    params: dict,
) -> dict:
    """Train on the shards in ``run_dir`` with params.yaml ``train``-shaped ``params``; the run's final metrics.

    The run directory is made self-contained: it holds the tokenizer and length index it used next
    to ``training_config.json``, the checkpoints and ``events.jsonl``. A failing rank fails torchrun,
    which raises here, so neither Kedro nor DVC records the stage as done.

    The run dir is this stage's output, so a rerun starts over: ``dvc repro`` deletes it first, and a
    second ``kedro run --pipelines=train`` deletes the previous run's files (only those) before training,
    as ``asr-pipeline train --overwrite-output-dir`` does (``training.run_dir.prepare_run_dir``). While
    another training writes the run dir, the node is refused, naming that training's pid.
    """
    index = io.BytesIO()
    length_index.write_parquet(index)
    # Every section of params.yaml train (schedule, curriculum, regularization, grow, ...) but the launch
    # options; an unknown one is refused by resolve_config, naming it.
    sections = {key: value for key, value in params.items() if key != "launch"}
    config = resolve_config(
        {
            **sections,
            "data": {
                **params.get("data", {}),
                "train_manifests": list(train_shards),
                "val_manifests": list(val_shards),
                "length_index": str(run_dir / INDEX_FILE),
            },
            "model": dict(params.get("model", {})),
            "optim": dict(params.get("optim", {})),
            "run": {
                **params.get("run", {}),
                "output_dir": str(run_dir),
                "tokenizer": str(run_dir / TOKENIZER_FILE),
            },
            "validation": dict(params.get("validation", {})),
        }
    )
    # train.launch: nproc_per_node (absent: one per run.device_indices entry, else 1) and the multi-node
    # rendezvous (nnodes, node_rank, rdzv_endpoint, rdzv_id, rdzv_backend), as torchrun takes them.
    return run_training(
        config,
        overwrite=True,
        run_files={TOKENIZER_FILE: tokenizer_model, INDEX_FILE: index.getvalue()},
        **launch_options(params.get("launch") or {}),
    )
