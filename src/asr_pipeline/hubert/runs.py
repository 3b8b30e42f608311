"""Reading a HuBERT pretraining run again after it ended: its dev loader (validation of every checkpoint, ABX,
the next iteration's layer features)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch
from torch.utils.data import DataLoader

from asr_pipeline.run_layout import CONFIG_FILE
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


__all__ = ["dev_loader"]
