"""What a run keeps and when it scores, ``TrainerState``: resuming from a checkpoint, writing one (every
rank's RNG state and totals into rank 0's), validating and the early-stopping decision after it.
``training.trainer.Trainer`` mixes it in (its ``__init__`` sets the attributes these methods use); the methods
keep their Trainer names.

Starting points (``training.resume``): ``run.resume_from`` is checked against the saved config before
anything is written; ``run.init_from`` copies matching tensors. ``optim.ema_decay`` and
``optim.use_averaged_model`` keep weight averages (``training.ema``); validation scores the raw weights
(they choose ``checkpoint_best``) and, with ``validation.score_averages``, each average too.
``run.dry_run`` stops after one forward.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import torch

from asr_pipeline.models.lora import load_saved_weights
from asr_pipeline.run_layout import WEIGHTS
from asr_pipeline.training.checkpoint import load_training_state, load_weights, restore_rng, rng_state
from asr_pipeline.training.distributed import gather
from asr_pipeline.training.ema import weights_swapped
from asr_pipeline.training.validation import validate, validation_metrics


class TrainerState:
    """The Trainer's checkpoint and validation methods (module docstring), split from the class to keep
    each file readable."""

    def resume(self, run_dir: str | Path) -> int:
        """Load ``run_dir``'s latest checkpoint; returns the epoch to continue in."""
        state = load_training_state(run_dir)
        for hook in self.hooks:  # before the weights: a widening run rebuilds the width it saved
            if hook.state_key is not None:
                hook.load_state_dict(self, state.get(hook.state_key))
        # Into the unwrapped model: DDP wraps the same parameters, so every rank resumes from these (a LoRA
        # run's adapters onto the base weights loaded at the start).
        load_saved_weights(self.model, load_weights(run_dir), str(run_dir))
        self.optimization.load_state_dict(state)
        self.sampler.load_state_dict(state["sampler"])
        self.step = state["step"]
        self.health.load_state_dict(state["counters"])
        self.checkpoints.load_state_dict(state)
        if self.early_stopping is not None:
            self.early_stopping.load_state_dict(state.get("early_stopping"))
        self.optimization.load_averages(lambda file: load_weights(run_dir, file))
        self.epoch_totals = torch.tensor(
            state["epoch_totals"][self.ctx.rank], dtype=torch.float64, device=self.ctx.device
        )
        restore_rng(state["rng"][self.ctx.rank], self.ctx.device)
        self.epoch = self.sampler.epoch
        return self.sampler.epoch

    def checkpoint(
        self, epoch: int, sampler_state: dict[str, Any], metrics: dict[str, Any], best: bool = False
    ) -> None:
        """Collective: every rank's RNG state and running totals go into rank 0's checkpoint
        (``training.run_checkpoints``; ``best``: ``checkpoint_best`` too, written first)."""
        self.health.sync(self.step, epoch)  # the saved counters are the run's, all ranks included
        rng, totals = gather(rng_state(self.ctx.device)), gather(self.epoch_totals.tolist())
        if not self.ctx.is_main:
            return
        averages = self.optimization.averages(self.model)
        training_state = {
            **self.optimization.state_dict(),
            "sampler": sampler_state,
            "rng": rng,
            "counters": self.health.state_dict(),
            "epoch_totals": totals,
        }
        if self.early_stopping is not None:
            training_state["early_stopping"] = self.early_stopping.state_dict()
        for hook in self.hooks:
            hook_state = None if hook.state_key is None else hook.state_dict(self)
            if hook_state is not None:
                training_state[hook.state_key] = hook_state
        self.checkpoints.write_latest(self.model, self.step, epoch, metrics, training_state, averages, best,
                                      self.optimization.average)  # fmt: skip

    def validate(self, epoch: int, trigger: Literal["step", "epoch"]) -> dict[str, Any] | None:
        """Collective. Score the validation set now; rank 0 writes the event and returns the scores.

        ``scores["best"]`` (rank 0) says the val CER is the lowest so far. A step validation that sets a
        new best writes ``checkpoint_best`` at once; after an epoch's validation the epoch checkpoint
        writes it (``checkpoint(best=True)``), first, before ``checkpoint_latest``.
        """
        assert self.data.val_loader is not None and self.decoder is not None, "no validation manifests"
        scores = validate(
            self.model, self.data.val_loader, self.config, self.ctx, self.tokenizer, self.decoder
        )
        if self.config.validation.score_averages:
            averaged = self._score_averages()
            if scores is not None:
                scores.update(averaged)
        self.validated_step = self.step
        self._train_mode()  # validation put every module back in training mode, frozen ones too
        if scores is None:  # not rank 0
            return None
        scores["trigger"] = trigger
        keys = validation_metrics(self.config.model.architecture)
        scores["best"] = self.checkpoints.offer(scores[keys[0]])  # lower is better: val_cer or val_loss
        if scores["best"] and trigger == "step":
            metrics = {key: scores[key] for key in keys}
            self.checkpoints.write_best(
                self.model, self.step, epoch, metrics, self.optimization.averages(self.model)
            )
        self.events.write("validation", self.step, epoch, scores)
        self.latest_scores = scores
        return scores

    def _score_averages(self) -> dict[str, Any]:
        """Collective. ``validate`` on each weight average kept (``validation.score_averages``), the raw
        weights put back after each: its metrics and ``duration_sec`` with the average's ``--weights`` name
        as suffix (``val_cer_averaged``, ``val_loss_ema``); empty off rank 0."""
        keys = (*validation_metrics(self.config.model.architecture), "val_loss", "duration_sec")
        names = {file: name for name, file in WEIGHTS.items()}
        scores: dict[str, Any] = {}
        for file, state in self.optimization.averages(self.model).items():
            with weights_swapped(self.model, state):
                averaged = validate(
                    self.model, self.data.val_loader, self.config, self.ctx, self.tokenizer, self.decoder
                )
            if averaged is not None:
                scores.update({f"{key}_{names[file]}": averaged[key] for key in dict.fromkeys(keys)})
        return scores

    def consider_stopping(self, epoch: int) -> bool:
        """Collective. Whether early stopping ends the run after ``epoch`` (training.early_stopping): rank 0
        decides on its closing validation score and every rank gets the answer; rank 0 logs an "early_stop"
        event when it stops."""
        if self.early_stopping is None:
            return False
        stop = False
        if self.ctx.is_main:
            if self.latest_scores is None:
                raise RuntimeError(
                    f"epoch {epoch + 1} ended without a validation score; optim.early_stopping_patience needs "
                    "validation manifests (data.val_manifests)"
                )
            stop = self.early_stopping.update(epoch, float(self.latest_scores[self.early_stopping.score_key]))
            if stop:
                self.events.write("early_stop", self.step, epoch, self.early_stopping.to_event(epoch))
                print(f"[train] early stop: {self.early_stopping.to_event(epoch)['reason']}", flush=True)
        return bool(gather(stop)[0])
