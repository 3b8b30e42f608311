"""One rank's ``Trainer``: the model and the steps of an epoch. The Trainer composes the parts that own
the rest, each in its own module: ``training.optimization`` (AdamW, the f16 scaler, clipping, the learning
rate -- step schedule or Newbob control -- and the EMA), ``training.health`` (the run's counters and the
non-finite abort) and ``training.run_checkpoints`` (latest and best checkpoints). Its step (forward,
backward, the optimizer update, the train log: ``training.trainer_step``) and its checkpoints and
validations (``training.trainer_state``) are methods of their own modules; ``training.loop.train`` runs it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from asr_kernels import set_kernels
from asr_pipeline.data.collate import Batch
from asr_pipeline.models.initialization import initialize
from asr_pipeline.models.loading import load_pretrained_weights
from asr_pipeline.modules.widening import widen_into
from asr_pipeline.text.tokenizer import CTCTokenizer
from asr_pipeline.training.checkpoint import build_model_from_config
from asr_pipeline.training.config import TrainConfig
from asr_pipeline.training.cr_ctc import CRCTC
from asr_pipeline.training.ctc import output_kind
from asr_pipeline.training.distributed import DistributedContext, all_reduce_sum, maybe_inject_fault
from asr_pipeline.training.early_stopping import EarlyStopping
from asr_pipeline.training.epoch_schedule import EpochSettings, steps_reference_epoch
from asr_pipeline.training.events import EventLog
from asr_pipeline.training.finetune import loads_starting_weights
from asr_pipeline.training.growth import widening_report, width_at
from asr_pipeline.training.health import RunHealth
from asr_pipeline.training.hooks import TrainingHook, build_hooks
from asr_pipeline.training.live import TrainingProgress
from asr_pipeline.training.loaders import DataBundle, nothing_trained_error
from asr_pipeline.training.optimization import Optimization
from asr_pipeline.training.regularization import build_regularization
from asr_pipeline.training.resume import init_from_weights
from asr_pipeline.training.run_checkpoints import RunCheckpoints
from asr_pipeline.training.trainer_state import TrainerState
from asr_pipeline.training.trainer_step import TrainerStep
from asr_pipeline.training.validation import ValidationDecoder, validation_metrics


class Trainer(TrainerStep, TrainerState):
    """One rank's model and the steps of its loop, composed of the parts that own the rest:
    ``optimization`` (optimizer, scaler, learning rate, EMA: ``training.optimization``), ``health`` (the
    run's counters and the non-finite abort: ``training.health``) and ``checkpoints`` (latest and best:
    ``training.run_checkpoints``), and ``hooks`` (growth, fine-tuning, Newbob: ``training.hooks``, by
    default those ``config`` asks for), called at fixed points of the run. Its step methods live in
    ``training.trainer_step``, its checkpoint and validation methods in ``training.trainer_state``.

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
        if config.model.init and not config.run.resume_from:  # a resumed run loads its trained weights
            counts = initialize(self.model, config.model.init, config.run.seed)
            events.write("init", 0, 0, {"schemes": dict(config.model.init), "modules": counts})
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
        # loss sum, target tokens, audio ms: this rank, this epoch (on the device: read at the epoch's end)
        self.epoch_totals = torch.zeros(3, dtype=torch.float64, device=ctx.device)
        self.epoch_skipped_examples = 0  # examples the loader could not produce: this rank, this epoch
        self.epoch_skipped_first: list[str] = []  # the first of them, "location: reason (detail)"
        self.window = torch.zeros(4, dtype=torch.float64, device=ctx.device)  # + utterances, since last log
        # Multi-term losses (Paraformer): this rank's sum of each term, then their target tokens, since the
        # last log (on the device), and the terms' names.
        self.component_sums: torch.Tensor | None = None
        self.component_names: list[str] = []
        self.window_started = time.perf_counter()
        self.window_loader_wait = 0.0  # seconds this rank waited for the loader's next batch, since last log
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

    def _waited_for(self, loader: Iterable[Batch]) -> Iterator[Batch]:
        """``loader``'s batches; the time spent waiting for each is added to ``window_loader_wait``, the
        first's with the start of the epoch's iteration (worker processes started or woken)."""
        asked = time.perf_counter()
        for batch in loader:
            self.window_loader_wait += time.perf_counter() - asked
            yield batch
            asked = time.perf_counter()

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
            self.epoch_totals.zero_()
        self.epoch_skipped_examples = 0  # after a mid-epoch resume: counts the resumed part only
        self.epoch_skipped_first = []
        self._train_mode()
        accumulation = optim.gradient_accumulation_steps  # a resume always starts on a window boundary
        self.progress.start_epoch(
            epoch, math.ceil(epoch_batches / accumulation), math.ceil(batches_done / accumulation)
        )
        every_steps = config.validation.every_steps if self.data.val_loader is not None else None
        micro, window_size = 0, 1
        for batch in self._waited_for(self.data.train_loader):
            if micro == 0:  # the last window of an epoch may be short
                window_size = min(optim.gradient_accumulation_steps, epoch_batches - batches_done)
            maybe_inject_fault(self.ctx.rank, self.step)
            self.backward(batch, window_size, last_micro=micro + 1 == window_size)
            micro, batches_done = micro + 1, batches_done + 1
            if micro < window_size:
                continue
            micro = 0
            self.optimizer_step()
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
        skipped = torch.tensor([self.epoch_skipped_examples], dtype=torch.float64, device=self.ctx.device)
        sums = all_reduce_sum(torch.cat([self.epoch_totals, skipped]))
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

    def close(self) -> None:
        """The hooks' end, whether the run ended or failed (the compile cache's setting undone)."""
        for hook in self.hooks:
            hook.on_close(self)

    def end_epoch(self, epoch: int) -> None:
        """Collective. The hooks' end of ``epoch``, after its closing validation (Newbob's next rate)."""
        for hook in self.hooks:
            hook.on_epoch_end(self, epoch)
