"""Reading a HuBERT pretraining run again after it ended (validation of every checkpoint, ABX, the next
iteration's layer features): its dev loader, a kept checkpoint as a model, and the stages' TSV tables."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader

from asr_pipeline.models.registry import build_from_config
from asr_pipeline.run_layout import CONFIG_FILE
from asr_pipeline.training.checkpoint import read_kept_weights
from asr_pipeline.training.config import TrainConfig, load_json
from asr_pipeline.training.distributed import DistributedContext
from asr_pipeline.training.loaders import build_data


def dev_loader(
    run_dir: Path, manifests: list[str] | None = None
) -> tuple[TrainConfig, DistributedContext, DataLoader]:
    """The run's config, a single-process context on its device, and its validation loader (the dev
    utterances and units it validated on, batched as in training). ``manifests``: these utterances instead,
    without units (never augmented, in manifest order)."""
    config = load_json(run_dir / CONFIG_FILE)
    if manifests is not None:
        data = dataclasses.replace(config.data, val_manifests=list(manifests), val_alignment=None)
        config = dataclasses.replace(config, data=data)
    device = torch.device(f"cuda:{config.run.device_index}" if config.run.backend == "cuda" else "cpu")
    ctx = DistributedContext(rank=0, local_rank=0, world_size=1, device=device)
    loader = build_data(config, ctx).val_loader
    if loader is None:
        raise ValueError(f"{run_dir / CONFIG_FILE} has no validation manifests (data.val_manifests)")
    return config, ctx, loader


def load_kept_model(path: Path, architecture: str) -> tuple[nn.Module, dict[str, Any]]:
    """A kept checkpoint (``run.keep_checkpoints``) rebuilt at its own width, and its {"step", "epoch",
    "model_config"}."""
    state, info = read_kept_weights(path)
    model = build_from_config(architecture, info["model_config"])
    model.load_state_dict(state, strict=True)
    return model, info


def write_table(path: Path, columns: Sequence[str], rows: Sequence[dict[str, Any]], digits: int) -> None:
    """``rows`` as a TSV with a header; floats with ``digits`` decimals, None as an empty cell."""

    def cell(value: Any) -> str:
        if value is None:
            return ""
        return f"{value:.{digits}f}" if isinstance(value, float) else str(value)

    lines = ["\t".join(columns)] + ["\t".join(cell(row[column]) for column in columns) for row in rows]
    path.write_text("\n".join(lines) + "\n")


__all__ = ["dev_loader", "load_kept_model", "write_table"]
