"""Rank 0's checkpoints of one run (``checkpoint_latest``, ``checkpoint_best``) and the best score so far.

The files and their crash-safe write order are ``training.checkpoint``'s; this class decides what goes in
them and when a validation is a new best. ``checkpoint_best`` holds the weights of the lowest validation
CER so far; when an epoch's checkpoint is also a new best, the best one is written first, so that a crash
in between leaves a latest checkpoint whose ``best_val_cer`` does not claim a best checkpoint that was never
written. Nothing resumes from ``checkpoint_best``: it has weights (and the EMA) only.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from torch import nn

from asr_pipeline.publish.hub import CheckpointUploader, HubTarget
from asr_pipeline.run_layout import (
    CHECKPOINT_POINTER,
    CONFIG_FILE,
    TOKENIZER_FILE,
    WEIGHTS_FILE,
    committed_dir,
)
from asr_pipeline.training.checkpoint import BEST_DIR, CHECKPOINT_DIR, save_checkpoint, save_kept_weights
from asr_pipeline.training.config import TrainConfig
from asr_pipeline.training.ema import RunningAverage
from asr_pipeline.training.events import EventLog


class RunCheckpoints:
    """Writes the checkpoints of the run in ``config.run.output_dir``; call its writers on rank 0 only."""

    def __init__(self, config: TrainConfig, model_config: dict[str, Any], events: EventLog) -> None:
        self.config, self.model_config, self.events = config, model_config, events
        self.output_dir = Path(config.run.output_dir)
        self.best_val_cer = math.inf  # rank 0's is the one checkpointed and resumed
        self.uploader: CheckpointUploader | None = None  # run.hf_upload_checkpoints: made at the first write

    def offer(self, val_cer: float) -> bool:
        """Whether ``val_cer`` is the lowest so far (and it is then remembered as the best)."""
        if val_cer < self.best_val_cer:
            self.best_val_cer = val_cer
            return True
        return False

    def write_best(
        self,
        model: nn.Module,
        step: int,
        epoch: int,
        metrics: dict[str, Any],
        averages: dict[str, dict[str, torch.Tensor]],
    ) -> None:
        """The current weights (and their averages: file -> state dict) as ``checkpoint_best``."""
        save_checkpoint(self.output_dir, model=model, training_state=None, averages=averages, name=BEST_DIR,
                        step=step, epoch=epoch, model_config=self.model_config, metrics=metrics)  # fmt: skip

    def write_latest(
        self,
        model: nn.Module,
        step: int,
        epoch: int,
        metrics: dict[str, Any],
        training_state: dict[str, Any],
        averages: dict[str, dict[str, torch.Tensor]],
        best: bool = False,
        running_average: RunningAverage | None = None,
    ) -> None:
        """``checkpoint_latest`` (resumable: ``training_state`` plus ``best_val_cer``), after
        ``checkpoint_best`` when ``best``; then a "checkpoint" event. ``averages``: file -> state dict of
        each weight average; ``running_average`` is kept with the weights under ``run.keep_checkpoints``."""
        if best:
            self.write_best(model, step, epoch, metrics, averages)
        state = {**training_state, "best_val_cer": self.best_val_cer}
        save_checkpoint(self.output_dir, model=model, training_state=state, averages=averages, step=step,
                        epoch=epoch, model_config=self.model_config, metrics=metrics,
                        train_config=self.config)  # fmt: skip
        values = {"path": str(self.output_dir / CHECKPOINT_DIR), **metrics}
        if self.config.run.keep_checkpoints:
            kept = save_kept_weights(self.output_dir, model=model, step=step, epoch=epoch,
                                     model_config=self.model_config, average=running_average)  # fmt: skip
            values["kept_path"] = str(kept)
        if best:  # only on epoch checkpoints that improved: older readers see the same keys as before
            values["best_path"] = str(self.output_dir / BEST_DIR)
        self.events.write("checkpoint", step, epoch, values)
        if self.config.run.hf_upload_checkpoints:
            self._upload(step)

    def _upload(self, step: int) -> None:
        """Queue the checkpoint just written for the Hub: its files are read now, before the next write."""
        run = self.config.run
        if self.uploader is None:
            target = HubTarget(run.hf_upload_repo_id or "", run.hf_upload_revision, run.hf_upload_private)
            self.uploader = CheckpointUploader(target)
        files = {
            WEIGHTS_FILE: (committed_dir(self.output_dir) / WEIGHTS_FILE).read_bytes(),
            CHECKPOINT_POINTER: (self.output_dir / CHECKPOINT_POINTER).read_bytes(),
            CONFIG_FILE: (self.output_dir / CONFIG_FILE).read_bytes(),
        }
        if run.tokenizer and Path(run.tokenizer).is_file():
            files[TOKENIZER_FILE] = Path(run.tokenizer).read_bytes()
        self.uploader.submit(step, files)

    def finish_uploads(self) -> list[dict[str, Any]] | None:
        """Wait for the queued uploads; what happened to each (None when nothing was uploaded)."""
        if self.uploader is None:
            return None
        return [asdict(result) for result in self.uploader.close()]

    def load_state_dict(self, training_state: dict[str, Any]) -> None:
        self.best_val_cer = training_state.get("best_val_cer", math.inf)


__all__ = ["RunCheckpoints"]
