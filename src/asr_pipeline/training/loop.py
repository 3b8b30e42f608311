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
``skipped_steps``) -- no rank can disagree. Each rank counts its own non-finite losses and infeasible
targets; the counts are summed over ranks at every "train" event, checkpoint, epoch end and skipped step
(points every rank reaches together), and once the run's total of non-finite losses passes
``run.max_non_finite_losses`` every rank raises ``NonFiniteLossError`` (rank 0 first writes an "abort"
event naming the first batches that failed).

Gradient accumulation divides each micro-batch's per-token loss by the window size, so k micro-batches
with equal token counts give the gradient of one k-times larger batch; with unequal counts each
micro-batch weighs 1/k, as each rank weighs 1/world_size under DDP.

Precision (``run.precision``): bf16/f16 autocast the forward pass (``training.ctc``); weights, optimizer
state and CTC stay float32. f16 scales the loss with a ``GradScaler`` whose state is checkpointed; its
overflowing steps take the non-finite-gradient skip path, so the first few steps of an f16 run usually
count as ``skipped_steps`` while the scaler halves its initial 2^16 to a scale the gradients fit.

Starting points (``training.resume``): ``run.resume_from`` is checked against the saved config before
anything is written; ``run.init_from`` copies matching tensors. ``optim.ema_decay`` keeps a weight
average (``training.ema``); validation scores the raw weights. ``run.dry_run`` stops after one forward.

Validation (``training.validation``) follows every epoch and, with ``validation.every_steps``, every that
many optimizer steps; the lowest val CER so far is kept in ``checkpoint_best`` either way. Observability:
every event goes to ``events.jsonl`` and, on rank 0, to the progress display (``training.live``: tqdm, or
``run.tui``'s live table) and to DVCLive (``training.dvclive_logger``: curves for ``dvc plots show``).
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Literal

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from asr_kernels import set_kernels
from asr_pipeline.data.collate import Batch
from asr_pipeline.models.loading import load_pretrained_weights
from asr_pipeline.run_layout import METRICS_FILE, resolve_run_dir
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
from asr_pipeline.training.config import TrainConfig, check_vocab_source, peak_learning_rate, save_json
from asr_pipeline.training.ctc import check_targets, model_losses, output_kind
from asr_pipeline.training.distributed import (
    DistributedContext,
    all_reduce_sum,
    gather,
    maybe_inject_fault,
    parameter_digest,
)
from asr_pipeline.training.dry_run import dry_run
from asr_pipeline.training.dvclive_logger import DVCLiveLogger
from asr_pipeline.training.ema import EMA_FILE, WeightEMA
from asr_pipeline.training.events import EVENTS_FILE, EventListener, EventLog
from asr_pipeline.training.live import TrainingProgress
from asr_pipeline.training.loaders import DataBundle, build_data
from asr_pipeline.training.resume import check_resume_compatible, init_from_weights
from asr_pipeline.training.schedule import lr_schedule
from asr_pipeline.training.validation import ValidationDecoder, validate

MAX_NON_FINITE_EXAMPLES = 3  # batches per rank whose ids an abort message names
# Frames of silence a rank forwards for a batch whose every example was skipped (Trainer._backward_empty):
# enough for any subsampling front end to leave at least one output frame.
EMPTY_BATCH_FRAMES = 64


class NonFiniteLossError(RuntimeError):
    """More micro-batches had a NaN/inf loss than ``run.max_non_finite_losses`` allows."""


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
        tokenizer: CTCTokenizer | None = None,
        progress: TrainingProgress | None = None,
    ) -> None:
        self.config, self.ctx, self.data, self.vocab_size, self.events = config, ctx, data, vocab_size, events
        self.tokenizer = tokenizer
        self.progress = progress or TrainingProgress(epochs=config.optim.epochs, enabled=False, tui=False)
        # Built once: a KenLM model for beam-search validation is loaded per run, not per validation.
        self.decoder = (
            ValidationDecoder(
                config.validation, tokenizer, config.model.blank_id, output_kind(config.model.architecture)
            )
            if data.val_loader is not None
            else None
        )
        self.latest_scores: dict[str, Any] | None = None  # rank 0: the last validation's scores
        self.validated_step = -1  # the step of the last validation: an epoch end right after skips its own
        self.output_dir = Path(config.run.output_dir)
        set_kernels(config.run.kernels)  # process-wide: every op the model calls follows it
        # Identical initial weights on every rank (DDP broadcasts rank 0's as well) ...
        torch.manual_seed(config.run.seed)
        self.model, self.model_config = build_model_from_config(config, vocab_size)
        if config.model.load_pretrained_weights and not config.run.resume_from:  # the checkpoint wins
            model = config.model
            report = load_pretrained_weights(
                self.model, model.architecture, model.pretrained_dir, ctx.is_main
            )
            events.write("pretrained", 0, 0, report)
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
        # f16 only: its 5 exponent bits underflow small gradients, so the loss is scaled up before
        # backward and the gradients unscaled before clipping; bf16 has float32's range and needs none.
        self.scaler = torch.amp.GradScaler(ctx.device.type, enabled=config.run.precision == "f16")
        self.sampler = data.train_sampler
        self.step = 0  # optimizer steps taken (skipped ones included): the schedule's clock
        # The run's totals over every rank (the same on every rank after each _sync_counters) ...
        self.counters = {"skipped_steps": 0, "non_finite_losses": 0, "infeasible_targets": 0}
        self.pending_counts = [0, 0]  # ... and this rank's non-finite losses, infeasible targets since
        self.non_finite_batches: list[list[str]] = []  # ids of this rank's first non-finite batches
        self.epoch = 0
        self.epoch_totals = [0.0, 0.0, 0.0]  # loss sum, target tokens, audio ms: this rank, this epoch
        self.epoch_skipped_examples = 0  # examples the loader could not produce: this rank, this epoch
        self.window = torch.zeros(4, dtype=torch.float64, device=ctx.device)  # + utterances, since last log
        # Multi-term losses (Paraformer): this rank's sum of each term and its target tokens since the last log.
        self.component_sums: dict[str, float] = {}
        self.component_tokens = 0.0
        self.window_started = time.perf_counter()
        self.grad_norm = torch.tensor(0.0)
        # Plans differ a little per epoch under a frames budget; epoch 0's length sets the schedule's
        # epoch length (warmup/hold epochs of the epoch schedule, the decay horizon of both).
        steps_per_epoch = math.ceil(len(self.sampler.epoch_batches(0)) / optim.gradient_accumulation_steps)
        self.schedule = lr_schedule(optim, self.peak_lr, max(1, steps_per_epoch))
        if self.schedule.scaled and ctx.is_main:
            print(
                f"[train] {optim.epochs} epochs are too few for lr_warmup_epochs={optim.lr_warmup_epochs} + "
                f"lr_hold_epochs={optim.lr_hold_epochs}: scaled to {self.schedule.warmup_steps} warmup and "
                f"{self.schedule.hold_steps} hold steps, then {self.schedule.decay_steps} decay steps",
                flush=True,
            )
        self.ddp_model: nn.Module = self.model
        if ctx.distributed:
            device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
            self.ddp_model = DistributedDataParallel(self.model, device_ids=device_ids)

    def learning_rate(self, step: int) -> float:
        return self.schedule(step)

    def resume(self, run_dir: str | Path) -> int:
        """Load ``run_dir``'s latest checkpoint; returns the epoch to continue in."""
        state = load_training_state(run_dir)
        # Into the unwrapped model: DDP wraps the same parameters, so every rank resumes from these.
        self.model.load_state_dict(load_weights(run_dir))
        self.optimizer.load_state_dict(state["optimizer"])
        # An f32/bf16 run saved a disabled scaler's empty state: resumed in f16, the scaler starts fresh.
        if state["scaler"]:
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
        self.epoch = epoch
        epoch_batches, batches_done = len(self.sampler.epoch_batches()), self.sampler.batches_to_skip
        if batches_done == 0:
            self.epoch_totals = [0.0, 0.0, 0.0]
        self.epoch_skipped_examples = 0  # after a mid-epoch resume: counts the resumed part only
        self.ddp_model.train()
        accumulation = optim.gradient_accumulation_steps  # a resume always starts on a window boundary
        self.progress.start_epoch(
            epoch, math.ceil(epoch_batches / accumulation), math.ceil(batches_done / accumulation)
        )
        every_steps = config.validation.every_steps if self.data.val_loader is not None else None
        micro, window_size = 0, 1
        for batch in self.data.train_loader:
            if micro == 0:  # the last window of an epoch may be short
                window_size = min(optim.gradient_accumulation_steps, epoch_batches - batches_done)
            maybe_inject_fault(self.ctx.rank, self.step)
            self._backward(batch, window_size, last_micro=micro + 1 == window_size)
            micro, batches_done = micro + 1, batches_done + 1
            if micro < window_size:
                continue
            micro = 0
            skipped_before = self.counters["skipped_steps"]
            self._optimizer_step()
            # Every rank skips the same steps (see above), so all of them reach this collective.
            if self.counters["skipped_steps"] > skipped_before:
                self._sync_counters()
            self.progress.advance(self.step)
            # Also at the run's last step, so a run shorter than log_every still has its curves (dvc plots).
            # Every rank has the same epoch_batches, so all of them take this collective together.
            last_step = epoch == optim.epochs - 1 and batches_done == epoch_batches
            if self.step % config.run.log_every == 0 or last_step:
                self._log_train(epoch)
            if every_steps and self.step % every_steps == 0:
                self.run_validation(epoch, "step")
            if config.run.checkpoint_every_steps and self.step % config.run.checkpoint_every_steps == 0:
                self.checkpoint(epoch, self.sampler.state_dict(batches_done=batches_done), {})
        self._sync_counters()
        totals = [*self.epoch_totals, self.epoch_skipped_examples]
        sums = all_reduce_sum(torch.tensor(totals, dtype=torch.float64, device=self.ctx.device))
        loss_sum, tokens, audio_ms, skipped_examples = sums.tolist()
        return {
            "train_loss": loss_sum / max(tokens, 1),
            "batches": epoch_batches,
            "skipped_examples": int(skipped_examples),
            "steps": self.step,
            "audio_hours": audio_ms / 3.6e6,
            "duration_sec": time.perf_counter() - started,
            **self.counters,
        }

    def _backward(self, batch: Batch, window_size: int, last_micro: bool) -> None:
        self.epoch_skipped_examples += len(batch.skipped)  # undecodable audio etc. (data.collate)
        if len(batch) == 0:
            self._backward_empty(last_micro)
            return
        check_targets(batch, self.vocab_size, self.config.model.blank_id)
        batch = batch.to(self.ctx.device, non_blocking=True)
        # Only the last micro-batch of an accumulation window all-reduces gradients.
        sync = (
            self.ddp_model.no_sync() if self.ctx.distributed and not last_micro else contextlib.nullcontext()
        )
        with sync:
            step = model_losses(self.ddp_model, batch, self.config)
            losses, out_lengths = step.losses, step.out_lengths  # (B,), (B,)
            loss_sum, tokens = losses.sum(), batch.target_lengths.sum()
            self.scaler.scale(loss_sum / tokens.clamp(min=1) / window_size).backward()
        finite = torch.isfinite(loss_sum)
        stats = torch.stack(
            [
                torch.where(finite, loss_sum.detach(), 0.0).double(),
                torch.where(finite, tokens, 0).double(),
                batch.duration_ms.sum().double(),
                torch.tensor(len(batch), dtype=torch.float64, device=self.ctx.device),
            ]
        )
        self.window += stats
        counts = torch.stack([~finite, (out_lengths < batch.target_lengths).sum()]).double()
        *totals, non_finite, infeasible = torch.cat([stats[:3], counts]).tolist()  # one copy to the host
        self.epoch_totals = [total + value for total, value in zip(self.epoch_totals, totals, strict=True)]
        self.pending_counts = [
            self.pending_counts[0] + int(non_finite),
            self.pending_counts[1] + int(infeasible),
        ]
        if non_finite and len(self.non_finite_batches) < MAX_NON_FINITE_EXAMPLES:
            self.non_finite_batches.append(list(batch.ids))
        if step.components and not non_finite:  # this rank's loss terms, per target token at the next log
            sums = torch.stack(
                [value.detach().sum() for value in step.components.values()]
            ).tolist()  # one copy
            for name, value in zip(step.components, sums, strict=True):
                self.component_sums[name] = self.component_sums.get(name, 0.0) + value
            self.component_tokens += float(totals[1])

    def _backward_empty(self, last_micro: bool) -> None:
        """A batch whose every example was skipped. A single rank has nothing to add; under DDP this rank
        must still join the step's gradient all-reduce, or the other ranks wait for it forever. A
        zero-weighted forward of silence gives every parameter a zero gradient (DDP then averages this
        rank in as zero, like a rank whose batch has no tokens). In eval mode, so that the zeros do not
        move batch-norm statistics."""
        if not self.ctx.distributed:
            return
        frames, dim = EMPTY_BATCH_FRAMES, self.config.data.input_dim
        features = torch.zeros(1, frames, dim, device=self.ctx.device)  # (1, T, F)
        lengths = torch.full((1,), frames, dtype=torch.int64, device=self.ctx.device)  # (1,)
        sync = self.ddp_model.no_sync() if not last_micro else contextlib.nullcontext()
        self.ddp_model.eval()
        try:
            with sync:
                if output_kind(self.config.model.architecture) == "ctc":
                    log_probs, _ = self.ddp_model(features, lengths)  # (1, T', V)
                    (log_probs.float().sum() * 0.0).backward()
                else:  # a one-token target reaches every head a training step uses
                    target = torch.ones(1, 1, dtype=torch.int64, device=self.ctx.device)
                    outputs = self.ddp_model(features, lengths, target, torch.ones_like(lengths))
                    (outputs["loss"].float().sum() * 0.0).backward()
        finally:
            self.ddp_model.train()

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
        self._sync_counters()
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
                # rank 0's own terms per target token (not summed over ranks): what each loss weight buys
                **{
                    f"loss_{name}": value / max(self.component_tokens, 1.0)
                    for name, value in self.component_sums.items()
                },
            },
        )
        self.component_sums, self.component_tokens = {}, 0.0
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
        self._sync_counters()  # the saved counters are the run's, all ranks included
        rng, totals = gather(rng_state(self.ctx.device)), gather(self.epoch_totals)
        if not self.ctx.is_main:
            return
        ema = None if self.ema is None else self.ema.state_dict(self.model)
        common = {"step": self.step, "epoch": epoch, "model_config": self.model_config, "metrics": metrics}
        if best:
            self._write_best(epoch, metrics, ema)
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

    def _write_best(
        self, epoch: int, metrics: dict[str, Any], ema: dict[str, torch.Tensor] | None = None
    ) -> None:
        """Rank 0: the current weights (and EMA) as ``checkpoint_best``; nothing resumes from it."""
        if ema is None and self.ema is not None:
            ema = self.ema.state_dict(self.model)
        save_checkpoint(self.output_dir, model=self.model, training_state=None, ema_weights=ema,
                        name=BEST_DIR, step=self.step, epoch=epoch, model_config=self.model_config,
                        metrics=metrics)  # fmt: skip

    def run_validation(self, epoch: int, trigger: Literal["step", "epoch"]) -> dict[str, Any] | None:
        """Collective. Score the validation set now; rank 0 writes the event and returns the scores.

        ``scores["best"]`` (rank 0) says the val CER is the lowest so far. A step validation that sets a
        new best writes ``checkpoint_best`` at once; after an epoch's validation the epoch checkpoint
        writes it (``checkpoint(best=True)``), first, before ``checkpoint_latest``.
        """
        assert self.data.val_loader is not None and self.decoder is not None, "no validation manifests"
        scores = validate(
            self.model, self.data.val_loader, self.config, self.ctx, self.tokenizer, self.decoder
        )
        self.validated_step = self.step
        if scores is None:  # not rank 0
            return None
        scores["trigger"] = trigger
        scores["best"] = scores["val_cer"] < self.best_val_cer
        if scores["best"]:
            self.best_val_cer = scores["val_cer"]  # rank 0's is the one checkpointed and resumed
            if trigger == "step":
                self._write_best(epoch, {"val_cer": scores["val_cer"], "val_wer": scores["val_wer"]})
        self.events.write("validation", self.step, epoch, scores)
        self.latest_scores = scores
        return scores

    def _sync_counters(self) -> None:
        """Collective: fold every rank's pending counts into the run's counters; abort past the limit."""
        pending = torch.tensor(self.pending_counts, dtype=torch.float64, device=self.ctx.device)
        non_finite, infeasible = (int(count) for count in all_reduce_sum(pending).tolist())
        self.pending_counts = [0, 0]
        self.counters["non_finite_losses"] += non_finite
        self.counters["infeasible_targets"] += infeasible
        limit = self.config.run.max_non_finite_losses
        if limit is None or self.counters["non_finite_losses"] <= limit:
            return
        # Every rank holds the same counters here, so every rank reaches this gather and raises.
        examples = [ids for rank_batches in gather(self.non_finite_batches) for ids in rank_batches]
        reason = (
            f"{self.counters['non_finite_losses']} batches had a non-finite (NaN/inf) loss in the first "
            f"{self.step} optimizer steps, more than run.max_non_finite_losses={limit}: training diverged "
            f"or the data holds broken examples (first failing batches: {examples}). Lower "
            "optim.learning_rate or lengthen optim.lr_warmup_steps, check those utterances' features, "
            "or raise --max-non-finite-losses (run.max_non_finite_losses: null never aborts)"
        )
        self.events.write(
            "abort", self.step, self.epoch, {"reason": reason, "batches": examples, **self.counters}
        )
        raise NonFiniteLossError(reason)


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
    # The run dir, whichever form was given (the dir, its checkpoint_latest/ or checkpoint_latest.json).
    resume_dir = resolve_run_dir(config.run.resume_from) if config.run.resume_from else None
    if resume_dir is not None:  # before save_json: resuming in place would overwrite the saved config
        check_resume_compatible(config, resolved_model_config(config, vocab_size), resume_dir)
    if ctx.is_main:
        output_dir.mkdir(parents=True, exist_ok=True)
        save_json(config, output_dir / CONFIG_FILE)
    # Rank 0 only: the terminal display and the DVCLive curves, both fed by the event log.
    observe = ctx.is_main and not config.run.dry_run
    progress = TrainingProgress(epochs=config.optim.epochs, enabled=observe, tui=config.run.tui)
    resumed_in_place = resume_dir is not None and resume_dir.resolve() == output_dir.resolve()
    dvclive = DVCLiveLogger(output_dir, resume=resumed_in_place) if observe and config.run.dvclive else None
    listeners: list[EventListener] = [progress] if dvclive is None else [progress, dvclive]
    events = EventLog(
        output_dir / EVENTS_FILE,
        enabled=ctx.is_main,
        append=resume_dir is not None,
        listeners=listeners,
    )
    try:
        data = build_data(config, ctx)
        trainer = Trainer(config, ctx, data, vocab_size, events, tokenizer=tokenizer, progress=progress)
        start_epoch = trainer.resume(resume_dir) if resume_dir is not None else 0
        if config.run.dry_run:
            values = dry_run(trainer.model, data.train_loader, config, ctx, vocab_size)
            events.write("dry_run", trainer.step, start_epoch, values)
            if ctx.is_main:
                write_json_atomic(output_dir / METRICS_FILE, {"dry_run": True, "steps": 0, **values})
            return values
        events.write("data", trainer.step, start_epoch, data.report)
        final = _train_epochs(trainer, start_epoch)
        digests = gather(parameter_digest(trainer.model))
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
        return final
    finally:  # a failed run keeps its log, its curves so far and a usable terminal
        events.close()
        progress.close()
        if dvclive is not None:
            dvclive.close()


def _train_epochs(trainer: Trainer, start_epoch: int) -> dict[str, Any]:
    """Collective. The epochs from ``start_epoch`` on, each validated and checkpointed; the final metrics."""
    config, ctx = trainer.config, trainer.ctx
    metrics: dict[str, Any] = {"train_loss": None, "val_cer": None, "val_wer": None}
    for epoch in range(start_epoch, config.optim.epochs):
        epoch_values = trainer.train_epoch(epoch)
        metrics["train_loss"] = epoch_values["train_loss"]
        best = False  # meaningful on rank 0 only, the one rank that writes checkpoints
        # A step validation at the epoch's last step already scored these weights (and kept a best).
        if trainer.data.val_loader is not None and trainer.validated_step != trainer.step:
            scores = trainer.run_validation(epoch, "epoch")
            best = scores is not None and scores["best"]
        if trainer.latest_scores is not None:
            metrics.update(val_cer=trainer.latest_scores["val_cer"], val_wer=trainer.latest_scores["val_wer"])
        trainer.events.write("epoch", trainer.step, epoch, epoch_values)
        if ctx.is_main:
            _print_epoch(epoch, config.optim.epochs, trainer.step, metrics, epoch_values["duration_sec"])
        trainer.checkpoint(
            epoch, {**trainer.sampler.state_dict(batches_done=0), "epoch": epoch + 1}, dict(metrics), best
        )
    return {
        **metrics,
        "steps": trainer.step,
        "epochs": config.optim.epochs,
        "train_audio_hours": trainer.data.train_audio_hours,
    }


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
        check_vocab_source(config)
        assert config.model.vocab_size is not None
        return config.model.vocab_size
    if config.model.vocab_size not in (None, tokenizer.vocab_size):
        raise ValueError(
            f"model.vocab_size={config.model.vocab_size} but the tokenizer {config.run.tokenizer} "
            f"has {tokenizer.vocab_size} outputs (pieces + blank); unset model.vocab_size"
        )
    return tokenizer.vocab_size


__all__ = ["METRICS_FILE", "NonFiniteLossError", "Trainer", "train"]
