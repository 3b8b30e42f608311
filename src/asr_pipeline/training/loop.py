"""The training loop: one rank's ``Trainer`` (model, optimizer, schedule, counters) and ``train``, which
runs the epochs, validates, checkpoints and writes the run dir.

Loss: CTC summed over the batch and divided by the batch's number of target tokens. Adaptive batches
range from a few long utterances to many short ones; ``reduction="mean"`` divides every utterance by its
own length and then averages utterances, so a token of a short utterance would weigh more than one of a
long utterance, and the gradient scale would follow batch composition. Per-token normalisation weighs
every token alike. Each rank normalises by its own tokens and DDP averages the ranks.

Non-finite losses: ``zero_infinity=True`` zeroes impossible alignments (too few output frames for the
target; ``infeasible_targets`` counts the clear cases, fewer output frames than target tokens). A NaN/inf
that still gets through makes this rank's gradients non-finite, DDP's all-reduce spreads that to every
rank, and every rank then sees the same non-finite gradient norm and skips the same step (counted as
``skipped_steps``) -- no extra collective and no rank can disagree.

Gradient accumulation divides each micro-batch's per-token loss by the window size, so k micro-batches
with equal token counts give the gradient of one k-times larger batch; with unequal counts each
micro-batch weighs 1/k, as each rank weighs 1/world_size under DDP.

Starting points (``training.resume``): ``run.resume_from`` is checked against the saved config before
anything is written; ``run.init_from`` copies matching tensors. ``optim.ema_decay`` keeps a weight
average (``training.ema``); validation scores the raw weights. ``run.dry_run`` stops after one forward.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from asr_pipeline.data.collate import Batch
from asr_pipeline.text.tokenizer import CTCTokenizer
from asr_pipeline.training.checkpoint import (
    BEST_DIR,
    CHECKPOINT_DIR,
    CONFIG_FILE,
    build_model_from_config,
    load_training_state,
    load_weights,
    resolved_model_config,
    restore_rng,
    rng_state,
    save_checkpoint,
    write_json_atomic,
)
from asr_pipeline.training.config import TrainConfig, peak_learning_rate, save_json
from asr_pipeline.training.ctc import check_targets, ctc_losses
from asr_pipeline.training.distributed import (
    DistributedContext,
    all_reduce_sum,
    gather,
    maybe_inject_fault,
    parameter_digest,
)
from asr_pipeline.training.dry_run import dry_run
from asr_pipeline.training.ema import EMA_FILE, WeightEMA
from asr_pipeline.training.events import EVENTS_FILE, EventLog
from asr_pipeline.training.loaders import DataBundle, build_data
from asr_pipeline.training.resume import check_resume_compatible, init_from_weights
from asr_pipeline.training.run_layout import METRICS_FILE
from asr_pipeline.training.schedule import default_decay_steps, warmup_hold_decay
from asr_pipeline.training.validation import validate


def _decay_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    # Decay matrices and conv kernels only: decaying norm scales and biases pulls them towards 0,
    # which regularises nothing useful (the nanoGPT / GPT-2 convention).
    params = [p for p in model.parameters() if p.requires_grad]
    return [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]


class Trainer:
    """One rank's model, optimizer and counters, and the steps of its loop.

    Methods marked "collective" run collectives (all-reduce, all-gather) and must be called by every
    rank at the same point; the others are local.
    """

    def __init__(
        self,
        config: TrainConfig,
        ctx: DistributedContext,
        data: DataBundle,
        vocab_size: int,
        events: EventLog,
    ) -> None:
        self.config, self.ctx, self.data, self.vocab_size, self.events = config, ctx, data, vocab_size, events
        self.output_dir = Path(config.run.output_dir)
        # Identical initial weights on every rank (DDP broadcasts rank 0's as well) ...
        torch.manual_seed(config.run.seed)
        self.model, self.model_config = build_model_from_config(config, vocab_size)
        if config.run.init_from and not config.run.resume_from:  # the same file on every rank
            events.write("init_from", 0, 0, init_from_weights(self.model, config.run.init_from, ctx.is_main))
        self.model.to(ctx.device)
        optim = config.optim
        self.ema = WeightEMA(self.model, optim.ema_decay, optim.ema_start_step) if optim.ema_decay else None
        self.best_val_cer = math.inf
        # ... but different dropout and SpecAugment draws per rank.
        torch.manual_seed(config.run.seed + 1 + ctx.rank)
        self.peak_lr = peak_learning_rate(config)
        self.optimizer = torch.optim.AdamW(
            _decay_groups(self.model, config.optim.weight_decay), lr=self.peak_lr
        )
        self.scaler = torch.amp.GradScaler(ctx.device.type, enabled=config.run.precision == "f16")
        self.sampler = data.train_sampler
        self.step = 0  # optimizer steps taken (skipped ones included): the schedule's clock
        self.counters = {"skipped_steps": 0, "non_finite_losses": 0, "infeasible_targets": 0}
        self.epoch_totals = [0.0, 0.0, 0.0]  # loss sum, target tokens, audio ms: this rank, this epoch
        self.window = torch.zeros(4, dtype=torch.float64, device=ctx.device)  # + utterances, since last log
        self.window_started = time.perf_counter()
        self.grad_norm = torch.tensor(0.0)
        # Plans differ a little per epoch under a frames budget; epoch 0's length sets the decay horizon.
        steps_per_epoch = math.ceil(len(self.sampler.epoch_batches(0)) / optim.gradient_accumulation_steps)
        self.decay_steps = optim.lr_decay_steps or default_decay_steps(
            optim.epochs * steps_per_epoch, optim.lr_warmup_steps, optim.lr_hold_steps
        )
        self.ddp_model: nn.Module = self.model
        if ctx.distributed:
            device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
            self.ddp_model = DistributedDataParallel(self.model, device_ids=device_ids)

    def learning_rate(self, step: int) -> float:
        optim = self.config.optim
        return warmup_hold_decay(
            step,
            peak_lr=self.peak_lr,
            warmup_steps=optim.lr_warmup_steps,
            hold_steps=optim.lr_hold_steps,
            decay_steps=self.decay_steps,
            min_lr=optim.lr_min,
            power=optim.lr_decay_power,
        )

    def resume(self, run_dir: str) -> int:
        """Load ``run_dir``'s latest checkpoint; returns the epoch to continue in."""
        state = load_training_state(run_dir)
        # Into the unwrapped model: DDP wraps the same parameters, so every rank resumes from these.
        self.model.load_state_dict(load_weights(run_dir))
        self.optimizer.load_state_dict(state["optimizer"])
        self.scaler.load_state_dict(state["scaler"])
        self.sampler.load_state_dict(state["sampler"])
        self.step, self.counters = state["step"], dict(state["counters"])
        self.best_val_cer = state.get("best_val_cer", math.inf)
        if self.ema is not None:
            self.ema.load_state_dict(load_weights(run_dir, EMA_FILE))
        self.epoch_totals = list(state["epoch_totals"][self.ctx.rank])
        restore_rng(state["rng"][self.ctx.rank], self.ctx.device)
        return self.sampler.epoch

    def train_epoch(self, epoch: int) -> dict[str, Any]:
        """Collective. One pass over this rank's batches of ``epoch``; returns the epoch event's values."""
        config, optim = self.config, self.config.optim
        started = time.perf_counter()
        self.sampler.set_epoch(epoch)
        epoch_batches, batches_done = len(self.sampler.epoch_batches()), self.sampler.batches_to_skip
        if batches_done == 0:
            self.epoch_totals = [0.0, 0.0, 0.0]
        self.ddp_model.train()
        progress = tqdm(
            total=epoch_batches,
            initial=batches_done,
            desc=f"epoch {epoch + 1}/{optim.epochs}",
            disable=not (self.ctx.is_main and sys.stderr.isatty()),
            leave=False,
        )
        micro, window_size = 0, 1
        for batch in self.data.train_loader:
            if micro == 0:  # the last window of an epoch may be short
                window_size = min(optim.gradient_accumulation_steps, epoch_batches - batches_done)
            maybe_inject_fault(self.ctx.rank, self.step)
            self._backward(batch, window_size, last_micro=micro + 1 == window_size)
            micro, batches_done = micro + 1, batches_done + 1
            progress.update(1)
            if micro < window_size:
                continue
            micro = 0
            self._optimizer_step()
            if self.step % config.run.log_every == 0:
                loss = self._log_train(epoch)
                progress.set_postfix(loss=f"{loss:.3f}")
            if config.run.checkpoint_every_steps and self.step % config.run.checkpoint_every_steps == 0:
                self.checkpoint(epoch, self.sampler.state_dict(batches_done=batches_done), {})
        progress.close()
        sums = all_reduce_sum(torch.tensor(self.epoch_totals, dtype=torch.float64, device=self.ctx.device))
        loss_sum, tokens, audio_ms = sums.tolist()
        return {
            "train_loss": loss_sum / max(tokens, 1),
            "batches": epoch_batches,
            "steps": self.step,
            "audio_hours": audio_ms / 3.6e6,
            "duration_sec": time.perf_counter() - started,
            **self.counters,
        }

    def _backward(self, batch: Batch, window_size: int, last_micro: bool) -> None:
        check_targets(batch, self.vocab_size, self.config.model.blank_id)
        batch = batch.to(self.ctx.device, non_blocking=True)
        # Only the last micro-batch of an accumulation window all-reduces gradients.
        sync = (
            self.ddp_model.no_sync() if self.ctx.distributed and not last_micro else contextlib.nullcontext()
        )
        with sync:
            losses, _, out_lengths = ctc_losses(self.ddp_model, batch, self.config)  # (B,), _, (B,)
            loss_sum, tokens = losses.sum(), batch.target_lengths.sum()
            self.scaler.scale(loss_sum / tokens.clamp(min=1) / window_size).backward()
        finite = torch.isfinite(loss_sum)
        self.counters["non_finite_losses"] += int(not finite)
        self.counters["infeasible_targets"] += int((out_lengths < batch.target_lengths).sum())
        stats = torch.stack(
            [
                torch.where(finite, loss_sum.detach(), 0.0).double(),
                torch.where(finite, tokens, 0).double(),
                batch.duration_ms.sum().double(),
                torch.tensor(len(batch), dtype=torch.float64, device=self.ctx.device),
            ]
        )
        self.window += stats
        self.epoch_totals = [
            total + value for total, value in zip(self.epoch_totals, stats[:3].tolist(), strict=True)
        ]

    def _optimizer_step(self) -> None:
        self.scaler.unscale_(self.optimizer)
        optim = self.config.optim
        clip = optim.gradient_clip_norm or math.inf  # inf: measure the norm, clip nothing
        self.grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip)
        if optim.gradient_clip_value is not None:  # after measuring: the logged norm is the unclipped one
            torch.nn.utils.clip_grad_value_(self.model.parameters(), optim.gradient_clip_value)
        # Gradients are all-reduced, so every rank sees the same norm and makes the same choice here.
        if torch.isfinite(self.grad_norm):
            for group in self.optimizer.param_groups:
                group["lr"] = self.learning_rate(self.step)
            self.scaler.step(self.optimizer)
        else:
            self.counters["skipped_steps"] += 1
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        if self.ema is not None:
            self.ema.update(self.model, self.step)
        self.step += 1

    def _log_train(self, epoch: int) -> float:
        """Collective: the loss and throughput since the last log, summed over ranks."""
        loss_sum, tokens, audio_ms, utterances = all_reduce_sum(self.window.clone()).tolist()
        elapsed = time.perf_counter() - self.window_started
        loss = loss_sum / max(tokens, 1)
        self.events.write(
            "train",
            self.step,
            epoch,
            {
                "loss": loss,
                "lr": self.learning_rate(self.step - 1),
                "grad_norm": float(self.grad_norm),
                "audio_seconds_per_sec": audio_ms / 1000 / elapsed,
                "utterances": int(utterances),
                **self.counters,
            },
        )
        self.window.zero_()
        self.window_started = time.perf_counter()
        return loss

    def checkpoint(
        self, epoch: int, sampler_state: dict[str, Any], metrics: dict[str, Any], best: bool = False
    ) -> None:
        """Collective: every rank's RNG state and running totals go into rank 0's checkpoint.

        ``best``: also write ``checkpoint_best`` -- first, so that a crash in between leaves a latest
        checkpoint whose ``best_val_cer`` does not claim a best checkpoint that was never written.
        """
        rng, totals = gather(rng_state(self.ctx.device)), gather(self.epoch_totals)
        if not self.ctx.is_main:
            return
        ema = None if self.ema is None else self.ema.state_dict(self.model)
        common = {"step": self.step, "epoch": epoch, "model_config": self.model_config, "metrics": metrics}
        if best:
            save_checkpoint(self.output_dir, model=self.model, training_state=None, ema_weights=ema,
                            name=BEST_DIR, **common)  # fmt: skip
        training_state = {
            "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict(),
            "sampler": sampler_state,
            "rng": rng,
            "counters": self.counters,
            "epoch_totals": totals,
            "best_val_cer": self.best_val_cer,
        }
        save_checkpoint(self.output_dir, model=self.model, training_state=training_state, ema_weights=ema,
                        train_config=self.config, **common)  # fmt: skip
        values = {"path": str(self.output_dir / CHECKPOINT_DIR), **metrics}
        if best:  # only on epoch checkpoints that improved: older readers see the same keys as before
            values["best_path"] = str(self.output_dir / BEST_DIR)
        self.events.write("checkpoint", self.step, epoch, values)


def train(config: TrainConfig, ctx: DistributedContext) -> dict[str, Any]:
    """Collective. Train as ``config`` says and write the run dir; returns the final metrics."""
    started = time.perf_counter()
    output_dir = Path(config.run.output_dir)
    tokenizer = (
        CTCTokenizer.from_file(config.run.tokenizer, blank_id=config.model.blank_id)
        if config.run.tokenizer
        else None
    )
    vocab_size = _vocab_size(config, tokenizer)
    if config.run.resume_from:  # before save_json: resuming in place would overwrite the saved config
        check_resume_compatible(config, resolved_model_config(config, vocab_size), config.run.resume_from)
    if ctx.is_main:
        output_dir.mkdir(parents=True, exist_ok=True)
        save_json(config, output_dir / CONFIG_FILE)
    events = EventLog(
        output_dir / EVENTS_FILE, enabled=ctx.is_main, append=config.run.resume_from is not None
    )
    data = build_data(config, ctx)
    trainer = Trainer(config, ctx, data, vocab_size, events)
    start_epoch = trainer.resume(config.run.resume_from) if config.run.resume_from else 0
    if config.run.dry_run:
        values = dry_run(trainer.model, data.train_loader, config, ctx, vocab_size)
        events.write("dry_run", trainer.step, start_epoch, values)
        if ctx.is_main:
            write_json_atomic(output_dir / METRICS_FILE, {"dry_run": True, "steps": 0, **values})
        events.close()
        return values

    metrics: dict[str, Any] = {"train_loss": None, "val_cer": None, "val_wer": None}
    for epoch in range(start_epoch, config.optim.epochs):
        epoch_values = trainer.train_epoch(epoch)
        metrics["train_loss"] = epoch_values["train_loss"]
        if data.val_loader is not None:
            scores = validate(trainer.model, data.val_loader, config, ctx, tokenizer)
            if scores is not None:
                metrics.update(val_cer=scores["val_cer"], val_wer=scores["val_wer"])
                events.write("validation", trainer.step, epoch, scores)
        # Validation scores on rank 0 only: every rank must agree before the collective checkpoint.
        best = gather(metrics["val_cer"] is not None and metrics["val_cer"] < trainer.best_val_cer)[0]
        if best and ctx.is_main:  # rank 0's value is the one checkpointed and resumed on every rank
            trainer.best_val_cer = metrics["val_cer"]
        events.write("epoch", trainer.step, epoch, epoch_values)
        if ctx.is_main:
            _print_epoch(epoch, config.optim.epochs, trainer.step, metrics, epoch_values["duration_sec"])
        trainer.checkpoint(
            epoch, {**trainer.sampler.state_dict(batches_done=0), "epoch": epoch + 1}, dict(metrics), best
        )

    digests = gather(parameter_digest(trainer.model))
    final = {
        **metrics,
        "steps": trainer.step,
        "epochs": config.optim.epochs,
        "train_audio_hours": data.train_audio_hours,
    }
    if ctx.is_main:
        write_json_atomic(output_dir / METRICS_FILE, final)
        events.write(
            "summary",
            trainer.step,
            config.optim.epochs - 1,
            {
                **final,
                **trainer.counters,
                "world_size": ctx.world_size,
                "parameter_digests": digests,
                "train_selection": asdict(data.train_selection),
                "wall_sec": time.perf_counter() - started,
            },
        )
    events.close()
    return final


def _print_epoch(epoch: int, epochs: int, step: int, metrics: dict[str, Any], seconds: float) -> None:
    # One plain line per epoch even when the progress bar is off (logs, CI, Kedro).
    scores = (
        ""
        if metrics["val_cer"] is None
        else (f", val CER {metrics['val_cer']:.2f}%, WER {metrics['val_wer']:.2f}%")
    )
    print(
        f"[train] epoch {epoch + 1}/{epochs}: step {step}, train loss {metrics['train_loss']:.4f}{scores} "
        f"({seconds:.1f}s)",
        flush=True,
    )


def _vocab_size(config: TrainConfig, tokenizer: CTCTokenizer | None) -> int:
    if tokenizer is None:
        if config.model.vocab_size is None:
            raise ValueError(
                "model.vocab_size is unset and there is no run.tokenizer to infer it from; set one"
            )
        return config.model.vocab_size
    if config.model.vocab_size not in (None, tokenizer.vocab_size):
        raise ValueError(
            f"model.vocab_size={config.model.vocab_size} but the tokenizer {config.run.tokenizer} "
            f"has {tokenizer.vocab_size} outputs (pieces + blank); unset model.vocab_size"
        )
    return tokenizer.vocab_size


__all__ = ["METRICS_FILE", "Trainer", "train"]
