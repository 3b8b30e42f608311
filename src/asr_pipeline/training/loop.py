"""The training loop: one rank's ``Trainer`` (the model and the steps of an epoch) and ``train``, which
runs the epochs, validates, checkpoints and writes the run dir. The Trainer composes the parts that own
the rest, each in its own module: ``training.optimization`` (AdamW, the f16 scaler, clipping, the learning
rate -- step schedule or Newbob control -- and the EMA), ``training.health`` (the run's counters and the
non-finite abort) and ``training.run_checkpoints`` (latest and best checkpoints).

Loss: CTC summed over the batch and divided by the batch's number of target tokens. Adaptive batches
range from a few long utterances to many short ones; ``reduction="mean"`` divides every utterance by its
own length and then averages utterances, so a token of a short utterance would weigh more than one of a
long utterance, and the gradient scale would follow batch composition. Per-token normalisation weighs
every token alike. Each rank normalises by its own tokens and DDP averages the ranks.

Non-finite losses: ``zero_infinity=True`` zeroes impossible alignments (too few output frames for the
target; ``infeasible_targets`` counts the clear cases, fewer output frames than target tokens). A NaN/inf
that still gets through makes this rank's gradients non-finite, DDP's all-reduce spreads that to every
rank, and every rank then sees the same non-finite gradient norm and skips the same step (counted as
``skipped_steps``) -- no rank can disagree. ``training.health`` sums the counts over ranks and aborts past
``run.max_non_finite_losses``.

Gradient accumulation divides each micro-batch's per-token loss by the window size, so k micro-batches
with equal token counts give the gradient of one k-times larger batch; with unequal counts each
micro-batch weighs 1/k, as each rank weighs 1/world_size under DDP.

Precision (``run.precision``): bf16/f16 autocast the forward pass (``training.ctc``); weights, optimizer
state and CTC stay float32. f16 scales the loss with a ``GradScaler`` whose state is checkpointed; its
overflowing steps take the non-finite-gradient skip path, so the first few steps of an f16 run usually
count as ``skipped_steps`` while the scaler halves its initial 2^16 to a scale the gradients fit.

Starting points (``training.resume``): ``run.resume_from`` is checked against the saved config before
anything is written; ``run.init_from`` copies matching tensors. ``optim.ema_decay`` and
``optim.use_averaged_model`` keep weight averages (``training.ema``); validation scores the raw weights.
``run.dry_run`` stops after one forward.

Validation (``training.validation``) follows every epoch and, with ``validation.every_steps``, every that
many optimizer steps; the lowest val CER so far is kept in ``checkpoint_best`` either way. Under
``optim.lr_control: newbob`` each epoch's closing validation (rank 0's scores, sent to every rank) decides
the next epoch's rate (an "lr_control" event). Growth, fine-tuning (LoRA, freezing, the merge) and Newbob are
hooks (``training.hooks``) the Trainer calls at fixed points; it does not branch on them. Observability:
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
from asr_pipeline.models.lora import load_saved_weights
from asr_pipeline.modules.widening import widen_into
from asr_pipeline.run_layout import METRICS_FILE, read_checkpoint_pointer, resolve_run_dir
from asr_pipeline.text.tokenizer import CTCTokenizer
from asr_pipeline.training import determinism
from asr_pipeline.training.checkpoint import (
    CONFIG_FILE,
    build_model_from_config,
    load_training_state,
    load_weights,
    resolved_model_config,
    restore_rng,
    rng_state,
    write_json_atomic,
)
from asr_pipeline.training.config import TrainConfig, check_vocab_source, save_json
from asr_pipeline.training.cr_ctc import CRCTC
from asr_pipeline.training.ctc import check_targets, empty_batch_loss, model_losses, output_kind
from asr_pipeline.training.distributed import (
    DistributedContext,
    all_reduce_sum,
    gather,
    maybe_inject_fault,
    parameter_digest,
)
from asr_pipeline.training.dry_run import dry_run
from asr_pipeline.training.dvclive_logger import DVCLiveLogger
from asr_pipeline.training.early_stopping import EarlyStopping
from asr_pipeline.training.epoch_schedule import EpochSettings, steps_reference_epoch
from asr_pipeline.training.events import EVENTS_FILE, EventListener, EventLog
from asr_pipeline.training.finetune import loads_starting_weights
from asr_pipeline.training.growth import widening_report, width_at
from asr_pipeline.training.health import NonFiniteLossError, RunHealth
from asr_pipeline.training.hooks import TrainingHook, build_hooks
from asr_pipeline.training.live import TrainingProgress
from asr_pipeline.training.loaders import SKIPPED_SHOWN, DataBundle, build_data, nothing_trained_error
from asr_pipeline.training.optimization import Optimization
from asr_pipeline.training.regularization import build_regularization
from asr_pipeline.training.resume import check_resume_compatible, init_from_weights
from asr_pipeline.training.run_checkpoints import RunCheckpoints
from asr_pipeline.training.validation import ValidationDecoder, validate, validation_metrics

# Frames of silence a rank forwards for a batch whose every example was skipped (Trainer.backward's empty
# case): enough for any subsampling front end to leave at least one output frame.
EMPTY_BATCH_FRAMES = 64


class Trainer:
    """One rank's model and the steps of its loop, composed of the parts that own the rest:
    ``optimization`` (optimizer, scaler, learning rate, EMA: ``training.optimization``), ``health`` (the
    run's counters and the non-finite abort: ``training.health``) and ``checkpoints`` (latest and best:
    ``training.run_checkpoints``), and ``hooks`` (growth, fine-tuning, Newbob: ``training.hooks``, by
    default those ``config`` asks for), called at fixed points of the run.

    Public steps, in the order an epoch uses them: ``train_epoch`` (which calls ``backward`` for every
    micro-batch and ``optimizer_step`` at the end of each accumulation window), ``validate``,
    ``end_epoch`` (the hooks' end of epoch: Newbob), ``checkpoint``; ``resume`` before the first. Methods marked
    "collective" run collectives (all-reduce, all-gather) and must be called by every rank at the same
    point; the others are local.
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
        hooks: list[TrainingHook] | None = None,
    ) -> None:
        self.config, self.ctx, self.data, self.vocab_size, self.events = config, ctx, data, vocab_size, events
        self.tokenizer = tokenizer
        self.hooks = build_hooks(config) if hooks is None else hooks
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
        self.width = width_at(config.grow, 0)  # a fraction of the model's width (training.growth)
        self.model, self.model_config = build_model_from_config(config, vocab_size, self.width)
        starting = loads_starting_weights(config)  # training.finetune: a LoRA resume loads its base too
        base_report = None
        if config.model.load_pretrained_weights and starting:
            model = config.model
            base_report = load_pretrained_weights(
                self.model, model.architecture, model.pretrained_dir, ctx.is_main
            )
            if not config.run.resume_from:
                events.write("pretrained", 0, 0, base_report)
        if config.run.init_from and starting:  # the same file on every rank
            base_report = init_from_weights(self.model, config.run.init_from, ctx.is_main)
            if not config.run.resume_from:
                events.write("init_from", 0, 0, base_report)
        for hook in self.hooks:  # LoRA adapters or the freezing plan (FinetuneHook)
            hook.on_weights_loaded(self, base_report)
        optim = config.optim
        self.sampler = data.train_sampler
        self.settings = EpochSettings(config)  # train.schedule: each epoch's effective config
        batches = len(self.sampler.epoch_batches(steps_reference_epoch(config.curriculum, optim.epochs)))
        steps_per_epoch = math.ceil(batches / optim.gradient_accumulation_steps)
        # ... but different dropout and SpecAugment draws per rank (the EMA copies, AdamW draws nothing).
        torch.manual_seed(config.run.seed + 1 + ctx.rank)
        self.model.to(ctx.device)
        self.optimization = Optimization(self.model, config, ctx.device, steps_per_epoch)
        self.health = RunHealth(ctx, events, config.run.max_non_finite_losses)
        self.checkpoints = RunCheckpoints(config, self.model_config, events)
        patience = config.optim.early_stopping_patience
        self.early_stopping = (
            None
            if patience is None
            else EarlyStopping(
                patience,
                config.optim.early_stopping_min_delta,
                validation_metrics(config.model.architecture)[0],
            )
        )
        self.step = 0  # optimizer steps taken (skipped ones included): the schedule's clock
        self.epoch = 0
        self.epoch_totals = [0.0, 0.0, 0.0]  # loss sum, target tokens, audio ms: this rank, this epoch
        self.epoch_skipped_examples = 0  # examples the loader could not produce: this rank, this epoch
        self.epoch_skipped_first: list[str] = []  # the first of them, "location: reason (detail)"
        self.window = torch.zeros(4, dtype=torch.float64, device=ctx.device)  # + utterances, since last log
        # Multi-term losses (Paraformer): this rank's sum of each term and its target tokens since the last log.
        self.component_sums: dict[str, float] = {}
        self.component_tokens = 0.0
        self.window_started = time.perf_counter()
        schedule = self.optimization.schedule
        if schedule.scaled and ctx.is_main and self.optimization.control is None:
            print(
                f"[train] {optim.epochs} epochs are too few for lr_warmup_epochs={optim.lr_warmup_epochs} + "
                f"lr_hold_epochs={optim.lr_hold_epochs}: scaled to {schedule.warmup_steps} warmup and "
                f"{schedule.hold_steps} hold steps, then {schedule.decay_steps} decay steps",
                flush=True,
            )
        self.micro = 0  # micro-batches of the current accumulation window so far (layer drop, noise draws)
        # CR-CTC (training.cr_ctc): the step masks two views of each batch and adds their consistency loss.
        self.cr_ctc = CRCTC(config) if config.regularization.cr_ctc else None
        # This rank's utterances in the current accumulation window (optim.lr_scale_with_batch).
        self.step_utterances = 0
        self._attach_model()

    def _attach_model(self) -> None:
        """Wire up what holds ``self.model``'s modules and parameters: the hooks' (a growth's block gate, which
        layer drop shares), weight noise, the EMA's name lookup, the dropout defaults and the DDP wrapper.
        Again after a widening."""
        # What the training step calls: the model, or a compiled wrapper of it (CompileHook).
        self.forward_module: nn.Module = self.model
        gate = None
        for hook in self.hooks:
            gate = hook.on_model(self) or gate
        self.layer_drop, self.weight_noise = build_regularization(
            self.model, self.config, self.ctx.rank, gate
        )
        self.parameter_names = {parameter: name for name, parameter in self.model.named_parameters()}
        # Each dropout layer's own probability, restored in epochs where the schedule leaves model.dropout.
        self.dropout_defaults = {m: m.p for m in self.model.modules() if isinstance(m, nn.Dropout)}
        self.wrap_ddp()

    def _train_mode(self) -> None:
        """Training mode, except for modules the hooks hold still (fine-tuning: batch-norm statistics too)."""
        self.ddp_model.train()
        for hook in self.hooks:
            hook.on_train_mode(self)

    def wrap_ddp(self) -> None:
        """Collective under DDP (it broadcasts rank 0's weights). Again whenever the parameters that require a
        gradient change (training.finetune's freezing), as DDP reduces only the ones that did when it wrapped."""
        self.ddp_model: nn.Module = self.forward_module
        if self.ctx.distributed:
            device_ids = [self.ctx.device.index] if self.ctx.device.type == "cuda" else None
            self.ddp_model = DistributedDataParallel(self.forward_module, device_ids=device_ids)

    def fresh_model(self, epoch: int, width: float) -> tuple[nn.Module, dict[str, Any]]:
        """A newly built model at ``width`` for a growth at ``epoch`` (training.growth) and its model config:
        the same on every rank, and without touching this rank's RNG."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.config.run.seed + 7919 * (epoch + 1))
            return build_model_from_config(self.config, self.vocab_size, width)

    def widen(self, epoch: int, width: float, copy: bool = True) -> dict[str, Any]:
        """Collective. Rebuild the model at ``width`` (training.growth): with ``copy``, the trained weights,
        optimizer state and EMA carried into the wider tensors; without (a resume, which loads them next),
        fresh ones. Returns the model-config fields that changed, {field: [old, new]}."""
        old_model, old_config = self.model, self.model_config
        model, self.model_config = self.fresh_model(epoch, width)
        model.to(self.ctx.device)
        if copy:
            widen_into(old_model, model)
        self.model, self.width = model, width
        self.optimization.rebuild(old_model, model, carry=copy)
        self.checkpoints.model_config = self.model_config
        self._attach_model()
        return widening_report(old_config, self.model_config)

    @property
    def counters(self) -> dict[str, int]:
        """The run's counters (``training.health``), every rank's included as of the last sync."""
        return self.health.counters

    @property
    def best_val_cer(self) -> float:
        return self.checkpoints.best_val_cer

    def learning_rate(self, step: int, epoch: int | None = None) -> float:
        """The rate of optimizer update ``step + 1`` in ``epoch`` (default: the current one)."""
        return self.optimization.learning_rate(step, self.epoch if epoch is None else epoch)

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
        self.epoch_totals = list(state["epoch_totals"][self.ctx.rank])
        restore_rng(state["rng"][self.ctx.rank], self.ctx.device)
        self.epoch = self.sampler.epoch
        return self.sampler.epoch

    def train_epoch(self, epoch: int) -> dict[str, Any]:
        """Collective. One pass over this rank's batches of ``epoch``; returns the epoch event's values."""
        config, optim = self.config, self.config.optim
        started = time.perf_counter()
        self.sampler.set_epoch(epoch)
        self.epoch = epoch
        for hook in self.hooks:  # collective: a widening, the epoch's depth, freezing (DDP wraps anew)
            hook.on_epoch_start(self, epoch)
        self.apply_settings(epoch)
        epoch_batches, batches_done = len(self.sampler.epoch_batches()), self.sampler.batches_to_skip
        if batches_done == 0:
            self.epoch_totals = [0.0, 0.0, 0.0]
        self.epoch_skipped_examples = 0  # after a mid-epoch resume: counts the resumed part only
        self.epoch_skipped_first = []
        self._train_mode()
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
            self.backward(batch, window_size, last_micro=micro + 1 == window_size)
            micro, batches_done = micro + 1, batches_done + 1
            if micro < window_size:
                continue
            micro = 0
            if not self.optimizer_step():
                # Every rank skips the same steps (the gradient norm is all-reduced): all reach this collective.
                self.health.sync(self.step, epoch)
            self.progress.advance(self.step)
            # Also at the run's last step, so a run shorter than log_every still has its curves (dvc plots).
            # Every rank has the same epoch_batches, so all of them take this collective together.
            last_step = epoch == optim.epochs - 1 and batches_done == epoch_batches
            if self.step % config.run.log_every == 0 or last_step:
                self._log_train(epoch)
            if every_steps and self.step % every_steps == 0:
                self.validate(epoch, "step")
            if config.run.checkpoint_every_steps and self.step % config.run.checkpoint_every_steps == 0:
                self.checkpoint(epoch, self.sampler.state_dict(batches_done=batches_done), {})
        self.health.sync(self.step, epoch)
        totals = [*self.epoch_totals, self.epoch_skipped_examples]
        sums = all_reduce_sum(torch.tensor(totals, dtype=torch.float64, device=self.ctx.device))
        loss_sum, tokens, audio_ms, skipped_examples = sums.tolist()
        if tokens == 0 and skipped_examples > 0:  # every rank skipped every example: not a 0.0 loss
            raise nothing_trained_error(self.epoch_skipped_first, int(skipped_examples), f"epoch {epoch + 1}")
        return {
            "train_loss": loss_sum / max(tokens, 1),
            "batches": epoch_batches,
            "skipped_examples": int(skipped_examples),
            "steps": self.step,
            "audio_hours": audio_ms / 3.6e6,
            "duration_sec": time.perf_counter() - started,
            "lr": self.optimization.logged_rate(self.step, epoch),
            **self.counters,
        }

    def apply_settings(self, epoch: int) -> None:
        """Put ``epoch``'s scheduled values (``train.schedule``) in effect on this rank's side of the step
        (clipping, weight decay, dropout; the data side follows the same schedule in its sampler and
        dataset) and log them as a "schedule" event. Nothing to do without a schedule."""
        if not self.settings.keys:
            return
        effective = self.settings.at(epoch)
        self.optimization.configure(effective.optim)
        if self.cr_ctc is not None:  # the views' SpecAugment follows the epoch's data.spec_* values
            self.cr_ctc.configure(effective.data)
        if self.layer_drop is not None:
            self.layer_drop.set_layer_drop(effective.regularization.layer_drop)
        if self.weight_noise is not None:
            self.weight_noise.std = effective.regularization.weight_noise_std
        if "model.dropout" in self.settings.keys:
            rate = effective.model.dropout
            for module, default in self.dropout_defaults.items():
                module.p = default if rate is None or rate == self.config.model.dropout else rate
        self.events.write("schedule", self.step, epoch, self.settings.values(epoch))

    def backward(self, batch: Batch, window_size: int, last_micro: bool) -> None:
        """Forward and backward of one micro-batch of an accumulation window of ``window_size``; only the
        last micro-batch (``last_micro``) all-reduces gradients under DDP."""
        self.epoch_skipped_examples += len(batch.skipped)  # undecodable audio etc. (data.collate)
        self.epoch_skipped_first += batch.skipped[: SKIPPED_SHOWN - len(self.epoch_skipped_first)]
        micro, self.micro = self.micro, self.micro + 1  # counted on every rank, empty batches included
        self.step_utterances += len(batch)
        if len(batch) == 0:
            self._backward_empty(last_micro)
            return
        check_targets(batch, self.vocab_size, self.config.model.blank_id)
        batch = batch.to(self.ctx.device, non_blocking=True)
        for hook in self.hooks:  # a compiled model's shape marks
            hook.on_batch(self, batch)
        sync = (
            self.ddp_model.no_sync() if self.ctx.distributed and not last_micro else contextlib.nullcontext()
        )
        if self.layer_drop is not None:  # the same blocks on every rank
            self.layer_drop.draw(self.step, micro)
        noise = self.weight_noise.applied(self.step, micro) if self.weight_noise else contextlib.nullcontext()
        with sync, noise:
            if self.cr_ctc is not None:
                step = self.cr_ctc.losses(self.ddp_model, batch, self.config, self.step)
            else:
                step = model_losses(self.ddp_model, batch, self.config)
            losses, out_lengths = step.losses, step.out_lengths  # (B,), (B,)
            # per target token, or per predicted frame (HuBERT)
            loss_sum = losses.sum()
            tokens = (batch.target_lengths if step.tokens is None else step.tokens).sum()
            self.optimization.scale(loss_sum / tokens.clamp(min=1) / window_size).backward()
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
        self.health.note_batch(bool(non_finite), int(infeasible), batch.ids)
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
                empty_batch_loss(self.ddp_model, features, lengths, self.config.model.architecture).backward()
        finally:
            self._train_mode()

    def optimizer_step(self) -> bool:
        """The update closing an accumulation window (``training.optimization``); the clock moves on
        either way. Returns False when the step was skipped for a non-finite gradient norm (counted)."""
        batch_size = None
        if self.optimization.config.lr_scale_with_batch is not None:  # the same rate on every rank
            local = torch.tensor([float(self.step_utterances)], dtype=torch.float64, device=self.ctx.device)
            batch_size = float(all_reduce_sum(local).item())
        applied = self.optimization.step(self.model, self.step, self.epoch, batch_size)
        self.micro = 0
        self.step_utterances = 0
        if not applied:
            self.health.note_skipped_step()
        self.step += 1
        for hook in self.hooks:
            hook.on_step(self)
        return applied

    def _log_train(self, epoch: int) -> float:
        """Collective: the loss and throughput since the last log, summed over ranks."""
        self.health.sync(self.step, epoch)
        loss_sum, tokens, audio_ms, utterances = all_reduce_sum(self.window.clone()).tolist()
        elapsed = time.perf_counter() - self.window_started
        loss = loss_sum / max(tokens, 1)
        self.events.write(
            "train",
            self.step,
            epoch,
            {
                "loss": loss,
                "lr": self.optimization.logged_rate(self.step, epoch),
                "grad_norm": float(self.optimization.grad_norm),
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
        """Collective: every rank's RNG state and running totals go into rank 0's checkpoint
        (``training.run_checkpoints``; ``best``: ``checkpoint_best`` too, written first)."""
        self.health.sync(self.step, epoch)  # the saved counters are the run's, all ranks included
        rng, totals = gather(rng_state(self.ctx.device)), gather(self.epoch_totals)
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

    def close(self) -> None:
        """The hooks' end, whether the run ended or failed (the compile cache's setting undone)."""
        for hook in self.hooks:
            hook.on_close(self)

    def end_epoch(self, epoch: int) -> None:
        """Collective. The hooks' end of ``epoch``, after its closing validation (Newbob's next rate)."""
        for hook in self.hooks:
            hook.on_epoch_end(self, epoch)


def train(config: TrainConfig, ctx: DistributedContext) -> dict[str, Any]:
    """Collective. Train as ``config`` says and write the run dir; returns the final metrics."""
    started = time.perf_counter()
    output_dir = Path(config.run.output_dir)
    tokenizer = (
        CTCTokenizer.from_file(config.run.tokenizer, blank_id=config.model.blank_id)
        if config.run.tokenizer
        else None
    )
    vocab_size = vocab_size_of(config, tokenizer)
    # The run dir, whichever form was given (the dir, its checkpoint_latest/ or checkpoint_latest.json).
    resume_dir = resolve_run_dir(config.run.resume_from) if config.run.resume_from else None
    if resume_dir is not None:  # before save_json: resuming in place would overwrite the saved config
        saved_width = width_at(config.grow, read_checkpoint_pointer(resume_dir)["epoch"])  # training.growth
        check_resume_compatible(config, resolved_model_config(config, vocab_size, saved_width), resume_dir)
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
    trainer = None
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
        if config.run.deterministic:
            events.write("deterministic", trainer.step, start_epoch, determinism.settings())
        events.write("data", trainer.step, start_epoch, data.report)
        final = _train_epochs(trainer, start_epoch)
        uploads = trainer.checkpoints.finish_uploads()  # rank 0's: None elsewhere
        if uploads is not None:
            events.write("hf_upload", trainer.step, config.optim.epochs - 1, {"checkpoints": uploads})
        digests = gather(parameter_digest(trainer.model))
        peaks = gather(peak_memory_mb(ctx.device))
        if ctx.is_main:
            write_json_atomic(output_dir / METRICS_FILE, final)
            for hook in trainer.hooks:  # the LoRA merge
                hook.on_run_end(trainer)
            events.write(
                "summary",
                trainer.step,
                config.optim.epochs - 1,
                {
                    **final,
                    **trainer.counters,
                    "world_size": ctx.world_size,
                    "parameter_digests": digests,
                    "peak_rss_mb": [peak["rss"] for peak in peaks],  # per rank, the process's high-water mark
                    **(
                        {"peak_cuda_mb": [peak["cuda"] for peak in peaks]}
                        if ctx.device.type == "cuda"
                        else {}
                    ),
                    "train_selection": asdict(data.train_selection),
                    "wall_sec": time.perf_counter() - started,
                },
            )
        return final
    finally:  # a failed run keeps its log, its curves so far and a usable terminal
        if trainer is not None:
            trainer.close()
        events.close()
        progress.close()
        if dvclive is not None:
            dvclive.close()


def _train_epochs(trainer: Trainer, start_epoch: int) -> dict[str, Any]:
    """Collective. The epochs from ``start_epoch`` on, each validated and checkpointed; the final metrics."""
    config, ctx = trainer.config, trainer.ctx
    score_keys = validation_metrics(config.model.architecture)  # val_cer, val_wer (HuBERT: val_loss, ...)
    metrics: dict[str, Any] = {"train_loss": None, **dict.fromkeys(score_keys)}
    stopped_early = False
    for epoch in range(start_epoch, config.optim.epochs):
        epoch_values = trainer.train_epoch(epoch)
        metrics["train_loss"] = epoch_values["train_loss"]
        best = False  # meaningful on rank 0 only, the one rank that writes checkpoints
        # A step validation at the epoch's last step already scored these weights (and kept a best).
        if trainer.data.val_loader is not None and trainer.validated_step != trainer.step:
            scores = trainer.validate(epoch, "epoch")
            best = scores is not None and scores["best"]
        trainer.end_epoch(epoch)
        if trainer.latest_scores is not None:
            metrics.update({key: trainer.latest_scores[key] for key in score_keys})
        trainer.events.write("epoch", trainer.step, epoch, epoch_values)
        if ctx.is_main:
            _print_epoch(epoch, config.optim.epochs, trainer.step, metrics, epoch_values["duration_sec"])
        stop = trainer.consider_stopping(epoch)  # before the checkpoint, which carries its state
        trainer.checkpoint(
            epoch, {**trainer.sampler.state_dict(batches_done=0), "epoch": epoch + 1}, dict(metrics), best
        )
        if stop:
            stopped_early = True
            break
    epochs_run = epoch + 1 - start_epoch if config.optim.epochs > start_epoch else 0
    final = {
        **metrics,
        "steps": trainer.step,
        "epochs": config.optim.epochs,
        "train_audio_hours": trainer.data.train_audio_hours,
    }
    if trainer.early_stopping is not None:
        final.update(
            stopped_early=stopped_early, best_epoch=trainer.early_stopping.best_epoch, epochs_run=epochs_run
        )
    return final


def peak_memory_mb(device: torch.device) -> dict[str, float]:
    """This process's peak resident memory (Linux ru_maxrss, KiB) and, on CUDA, peak allocated GPU memory, in MiB."""
    import resource

    peaks = {"rss": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
    if device.type == "cuda":
        peaks["cuda"] = round(torch.cuda.max_memory_allocated(device) / 2**20, 1)
    return peaks


def _print_epoch(epoch: int, epochs: int, step: int, metrics: dict[str, Any], seconds: float) -> None:
    # One plain line per epoch even when the progress bar is off (logs, CI, Kedro).
    scores = ""
    if metrics.get("val_accuracy") is not None:  # a self-supervised run (HuBERT): no text to score
        scores = f", val loss {metrics['val_loss']:.4f}, unit accuracy {metrics['val_accuracy']:.2f}%"
    elif metrics.get("val_cer") is not None:
        scores = f", val CER {metrics['val_cer']:.2f}%, WER {metrics['val_wer']:.2f}%"
    print(
        f"[train] epoch {epoch + 1}/{epochs}: step {step}, train loss {metrics['train_loss']:.4f}{scores} "
        f"({seconds:.1f}s)",
        flush=True,
    )


def vocab_size_of(config: TrainConfig, tokenizer: CTCTokenizer | None) -> int:
    """The model's number of outputs: the tokenizer's (pieces + blank) or, without one, ``model.vocab_size``;
    both given and different is refused."""
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


__all__ = ["METRICS_FILE", "NonFiniteLossError", "Trainer", "train", "vocab_size_of"]
