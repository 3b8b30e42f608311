"""An iteration's HuBERT pretraining (the ``hubert_pretrain@<iteration>`` stage): ``hubert-pretrain`` trained
through torchrun to predict the units of the iteration's units folder (``hubert.unit_folder``).

The run reads the audio itself (the iteration's raw manifests; the ``waveform`` frontend makes 320-sample
frames on the fly, so no waveform shards are stored) with ``data.alignment`` / ``data.val_alignment`` the
units of train and dev, and ``model.options.num_classes`` the iteration's cluster count. ``hubert.train``
holds the run's sections (as ``params.yaml train``); an iteration's ``train`` overrides them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from asr_pipeline.io.outputs import empty_directory
from asr_pipeline.run_layout import TOKENIZER_FILE
from asr_pipeline.training.config import deep_merge, resolve_config
from asr_pipeline.training.launch import launch_options, run_training


def pretrain_config(
    iteration_dir: Path, tokenizer_path: Path, train: dict[str, Any], overrides: dict[str, Any]
) -> dict[str, Any]:
    """The iteration's training config (as a dict for ``resolve_config``): ``train`` (hubert.train) under the
    iteration's ``overrides``, on ``iteration_dir/units``, into ``iteration_dir/run``."""
    units = iteration_dir / "units"
    sections = deep_merge(train, overrides)
    clusters = int(np.load(units / "centroids.npy").shape[0])  # what the units stage clustered into
    model = deep_merge({"architecture": "hubert-pretrain"}, sections.get("model") or {})
    model["options"] = {**(model.get("options") or {}), "num_classes": clusters}
    return {
        **sections,
        "data": {
            **(sections.get("data") or {}),
            "train_manifests": [str(units / "manifests" / "train.jsonl")],
            "val_manifests": [str(units / "manifests" / "dev.jsonl")],
            "alignment": str(units / "train.parquet"),
            "val_alignment": str(units / "dev.parquet"),
        },
        "model": model,
        "run": {
            **(sections.get("run") or {}),
            "output_dir": str(iteration_dir / "run"),
            "tokenizer": str(tokenizer_path),
        },
    }


def pretrain_iteration(
    iteration_dir: Path,
    tokenizer_model: bytes,
    train: dict[str, Any],
    overrides: dict[str, Any],
    launch: dict[str, Any],
) -> dict[str, Any]:
    """Pretrain in ``iteration_dir/run``, emptied first (its metrics: ``run/metrics.json``); ``launch``: the
    torchrun options (``training.launch.launch_options``). The run's final metrics."""
    run_dir = iteration_dir / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    empty_directory(run_dir)
    (run_dir / TOKENIZER_FILE).write_bytes(tokenizer_model)  # the text side of the raw manifests
    config = resolve_config(pretrain_config(iteration_dir, run_dir / TOKENIZER_FILE, train, overrides))
    return run_training(config, **launch_options(launch))


__all__ = ["pretrain_config", "pretrain_iteration"]
