"""The concerns a run may or may not have, as hooks the ``Trainer`` calls at fixed points of the run.

Each hook reads its own config section and owns its part of the run; the Trainer only calls its list
(``build_hooks``), in this order, and never branches on these concerns itself:

- ``GrowthHook`` (``train.grow``, ``training.growth``): the width of each epoch (a wider model rebuilt at
  the epoch's start, ``Trainer.widen``) and the active depth (encoder blocks joining);
- ``FinetuneHook`` (``train.finetune``, ``training.finetune``): LoRA adapters or the freezing plan after the
  starting weights are in, the "finetune" event, freezing/unfreezing by epoch, frozen modules held in eval
  mode, and the LoRA merge at the end of the run;
- ``NewbobHook`` (``optim.lr_control: newbob``, ``training.lr_control``): each epoch's closing validation
  scores (rank 0's, sent to every rank) handed to the learning-rate control, an "lr_control" event;
- ``CompileHook`` (``run.compile``, ``training.compile``): the compiled model the training step calls,
  each batch's shapes marked, the compile cache loaded and saved, and "compile" events (counts, time to
  the first step).

Two concerns need no hook: a curriculum (``train.curriculum``) is the data side's (the sampler's batch
plans, ``training.epoch_schedule``), the Trainer only asks ``epoch_schedule.steps_reference_epoch`` which
epoch sets the schedule's length; training on an alignment (frame-wise cross-entropy, on chunks of each
utterance with ``data.chunk_frames``) is the objective's (``training.ctc.model_losses`` on batches that
carry frame labels).

A hook with a ``state_key`` keeps its state in the checkpoint's training state under that key (the keys
are those of the checkpoints written before hooks existed: ``growth``), so a resume restores it.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch import nn

from asr_pipeline.data.collate import Batch
from asr_pipeline.models.lora import parameter_counts
from asr_pipeline.models.registry import get_spec
from asr_pipeline.training.compile import (
    CompileCache,
    CompileCounts,
    compile_counts,
    compile_model,
    default_cache_dir,
    mark_batch_shapes,
)
from asr_pipeline.training.config.run import inductor_options
from asr_pipeline.training.distributed import gather
from asr_pipeline.training.finetune import MERGED_DIR, describe, is_finetuning, merge_run, prepare_model
from asr_pipeline.training.growth import Growth, width_at
from asr_pipeline.training.regularization import BlockGate, encoder_gate

if TYPE_CHECKING:
    from asr_pipeline.data.sampler import LengthBucketedBatchSampler
    from asr_pipeline.training.config import TrainConfig
    from asr_pipeline.training.distributed import DistributedContext
    from asr_pipeline.training.events import EventLog
    from asr_pipeline.training.loaders import DataBundle
    from asr_pipeline.training.optimization import Optimization


class TrainerView(Protocol):
    """What a hook may read and call on the run's trainer (``training.trainer.Trainer`` is one): stated here so
    that the loop imports the hooks and not the other way round."""

    ctx: DistributedContext
    data: DataBundle
    events: EventLog
    model: nn.Module
    optimization: Optimization
    output_dir: Path
    parameter_names: dict[nn.Parameter, str]
    latest_scores: dict[str, Any] | None  # rank 0: the last validation's scores
    sampler: LengthBucketedBatchSampler  # the training batches' sampler
    epoch: int  # the epoch running (0-based)
    step: int
    width: float  # a fraction of the model's full width (training.growth)

    def wrap_ddp(self) -> None: ...

    def fresh_model(self, epoch: int, width: float) -> tuple[nn.Module, dict[str, Any]]: ...

    def widen(self, epoch: int, width: float, copy: bool = True) -> dict[str, Any]: ...


class TrainingHook:
    """The points of a run a hook may act at; each does nothing unless a hook overrides it. Points marked
    "collective" are reached by every rank together, so a hook may run collectives there."""

    state_key: str | None = None  # this hook's key in the checkpoint's training state (None: no state)

    def on_weights_loaded(self, trainer: TrainerView, base_report: dict[str, Any] | None) -> None:
        """Once, after the starting weights are in (``base_report``: what loading them reported, None
        when none were loaded) and before the optimizer is built over the model's parameters."""

    def on_model(self, trainer: TrainerView) -> BlockGate | None:
        """After the model is built or rebuilt (a widening), before DDP wraps it. A hook that gates the
        encoder blocks returns its gate, which layer drop then shares."""
        return None

    def on_train_mode(self, trainer: TrainerView) -> None:
        """After the model is put in training mode (every epoch, and after each validation)."""

    def on_batch(self, trainer: TrainerView, batch: Batch) -> None:
        """Before the forward pass of each training micro-batch, once it is on the device."""

    def on_step(self, trainer: TrainerView) -> None:
        """After each optimizer step (``trainer.step`` counts it already; skipped steps included)."""

    def on_epoch_start(self, trainer: TrainerView, epoch: int) -> None:
        """Collective. At the start of ``epoch`` (0-based), before its scheduled settings apply."""

    def on_epoch_end(self, trainer: TrainerView, epoch: int) -> None:
        """Collective. After ``epoch``'s closing validation (``trainer.latest_scores`` on rank 0), before
        its checkpoint."""

    def on_run_end(self, trainer: TrainerView) -> None:
        """Rank 0, after the last checkpoint and the final metrics are written."""

    def on_close(self, trainer: TrainerView) -> None:
        """Every rank, last, whether the run ended or failed: undo what the hook set process-wide."""

    def state_dict(self, trainer: TrainerView) -> dict[str, Any] | None:
        """What a resume needs (``state_key``); None: nothing to save at this point."""
        return None

    def load_state_dict(self, trainer: TrainerView, state: dict[str, Any] | None) -> None:
        """Before the checkpoint's weights load: the state saved under ``state_key`` (None if absent)."""


class GrowthHook(TrainingHook):
    """``train.grow``: widening by epoch and the active depth (``training.growth``)."""

    state_key = "growth"

    def __init__(self, config: TrainConfig) -> None:
        self.config = config
        self.growth: Growth | None = None  # depth growth, from the first model's gate on

    def on_model(self, trainer: TrainerView) -> BlockGate | None:
        if self.config.grow.start_layers is None:  # widening only
            return None
        gate = encoder_gate(trainer.model, self.config.model.architecture, "grow")
        if self.growth is None:
            self.growth = Growth(gate, self.config.grow, lambda epoch: self._fresh_blocks(trainer, epoch))
        else:
            self.growth.attach(gate)
        return gate

    def on_epoch_start(self, trainer: TrainerView, epoch: int) -> None:
        width = width_at(self.config.grow, epoch)
        if width > trainer.width:
            changed = trainer.widen(epoch, width)
            trainer.events.write("grow", trainer.step, epoch, {"width": width, "changed": changed})
        if self.growth is None:
            return
        before = self.growth.grown_depth
        joined = self.growth.begin_epoch(
            epoch, trainer.optimization.optimizer, lambda parameter: _restart_average(trainer, parameter)
        )
        if self.growth.grown_depth != before:
            values = {
                "depth": self.growth.grown_depth,
                "blocks": len(self.growth.gate.blocks),
                "joined": joined,
            }
            trainer.events.write("grow", trainer.step, epoch, values)

    def state_dict(self, trainer: TrainerView) -> dict[str, Any]:
        depth = {} if self.growth is None else self.growth.state_dict()
        return {**depth, "width": trainer.width}

    def load_state_dict(self, trainer: TrainerView, state: dict[str, Any] | None) -> None:
        state = state or {}
        width = state.get("width", 1.0)
        if width != trainer.width:  # a widening run saved before its last widening: rebuild that width
            trainer.widen(trainer.sampler.epoch, width, copy=False)
        if self.growth is not None and "grown_depth" in state:
            self.growth.load_state_dict(state)

    def _fresh_blocks(self, trainer: TrainerView, epoch: int) -> list[nn.Module]:
        """The encoder blocks of a newly built model (at the current width) for a depth growth at ``epoch``."""
        blocks_of = get_spec(self.config.model.architecture).encoder_blocks
        assert blocks_of is not None
        return blocks_of(trainer.fresh_model(epoch, trainer.width)[0])


def _restart_average(trainer: TrainerView, parameter: nn.Parameter) -> None:
    """A block that joined a growing network: its weight average starts from its new values."""
    ema = trainer.optimization.ema
    if ema is None:
        return
    name = trainer.parameter_names[parameter]
    if name in ema.shadow:
        ema.shadow[name].copy_(parameter.detach())


class FinetuneHook(TrainingHook):
    """``train.finetune``: LoRA or freezing set up, frozen modules by epoch, the LoRA merge at the end."""

    def __init__(self, config: TrainConfig) -> None:
        self.config = config
        self.freezing = None  # training.finetune.Freezing: the modules held still, by epoch

    def on_weights_loaded(self, trainer: TrainerView, base_report: dict[str, Any] | None) -> None:
        # LoRA adapters injected (drawn from the seeded RNG, alike on every rank), or the freezing plan made.
        self.freezing, values = prepare_model(trainer.model, self.config, base_report)
        if is_finetuning(self.config) and not self.config.run.resume_from:
            trainer.events.write("finetune", 0, 0, describe(trainer.model, values, self.freezing))

    def on_train_mode(self, trainer: TrainerView) -> None:
        if self.freezing is not None:
            self.freezing.hold()

    def on_epoch_start(self, trainer: TrainerView, epoch: int) -> None:
        if self.freezing is None or not self.freezing.apply(epoch):
            return
        trainer.wrap_ddp()  # collective: DDP reduces only the parameters that required a gradient when wrapping
        frozen = {"frozen": self.freezing.frozen, **parameter_counts(trainer.model)}
        trainer.events.write(
            "freeze", trainer.step, epoch, {**frozen, "modules": sorted(self.freezing.modules)}
        )

    def on_run_end(self, trainer: TrainerView) -> None:
        if not self.config.finetune.merge_lora:
            return
        # After the last checkpoint: the adapters of the best, folded in.
        output_dir = trainer.output_dir
        merged = merge_run(output_dir, output_dir / MERGED_DIR)
        trainer.events.write("merge_lora", trainer.step, self.config.optim.epochs - 1, {"path": str(merged)})


class NewbobHook(TrainingHook):
    """``optim.lr_control: newbob``: each epoch's closing validation decides the next epoch's rate."""

    def on_epoch_end(self, trainer: TrainerView, epoch: int) -> None:
        if trainer.data.val_loader is None or trainer.optimization.control is None:
            return
        # Rank 0's scores to every rank, so that every rank sets the same next rate.
        scores = gather(trainer.latest_scores if trainer.ctx.is_main else None)[0]
        if scores is None:
            raise RuntimeError(
                f"epoch {epoch + 1} ended without a validation score; optim.lr_control=newbob needs "
                "validation manifests (data.val_manifests)"
            )
        decision = trainer.optimization.record_validation(epoch, scores)
        assert decision is not None
        trainer.events.write("lr_control", trainer.step, epoch, decision.to_event())
        if trainer.ctx.is_main:
            print(
                f"[train] lr_control ({decision.kind}, {decision.score_key}): epoch {decision.epoch + 1} "
                f"trains at {decision.new_learning_rate:.3g} ({decision.reason})",
                flush=True,
            )


class CompileHook(TrainingHook):
    """``run.compile``: the training step calls ``torch.compile(trainer.model)`` (``trainer.forward_module``;
    ``trainer.model`` stays eager for validation, checkpoints and the averages; a widening compiles the new
    model). Shapes are marked "buckets" (B dynamic, T static) when ``data.pad_to_buckets`` pads the
    batches, else left to dynamo ("auto"). The compile cache (``run.compile_cache``) is in force from the
    first model to the end of the run: loaded before the first compile, saved (rank 0) after every epoch
    that compiled. A run starts from a clean dynamo (``torch._dynamo.reset``), as in a process of its own.
    ``run.compile_scope`` "layers" compiles each repeated layer, not the whole model
    (``training.compile.LayerCompiled``).

    Events ("compile"): after the first optimizer step (``phase`` "first_step"; ``first_step_sec``: from
    the Trainer's start, before the model is built, to the end of that step) and after every epoch
    (``phase`` "epoch", ``saved_bytes``); both carry ``CompileCounts`` since the run started and the
    settings (``mode``, ``scope``, ``backend``, ``options``, ``shapes``, ``cache_dir``, ``cache_loaded``).
    """

    def __init__(self, config: TrainConfig) -> None:
        run = config.run
        self.mode, self.backend, self.scope = str(run.compile), run.compile_backend, run.compile_scope
        self.options = inductor_options(run.compile_options)
        self.shapes = "buckets" if config.data.pad_to_buckets is not None else "auto"
        self.cache = CompileCache(run.compile_cache or default_cache_dir())
        self.started = time.perf_counter()
        self.in_force = contextlib.ExitStack()
        self.before: CompileCounts | None = None  # before the first compile
        self.cache_loaded = False
        self.first_step_sec: float | None = None
        self.saved_compiles = 0  # compiles when the cache was last saved

    def on_model(self, trainer: TrainerView) -> BlockGate | None:
        if self.before is None:  # the first model: the cache in force before anything compiles
            # dynamo as in a fresh process (what a torchrun rank is): frames another run or model compiled in
            # this process would fail their guards here, count as this run's recompilations and use up
            # dynamo's recompile limit (the file cache is kept).
            torch._dynamo.reset()
            self.in_force.enter_context(self.cache.active())
            self.cache_loaded = self.cache.load()
            self.before = compile_counts()
        trainer.forward_module = compile_model(  # type: ignore[attr-defined]
            trainer.model,
            backend=self.backend,
            mode=self.mode,
            scope=self.scope,
            shapes=self.shapes,
            options=self.options,
        )
        return None

    def on_batch(self, trainer: TrainerView, batch: Batch) -> None:
        mark_batch_shapes(batch.features, batch.feature_lengths, self.shapes)  # type: ignore[arg-type]

    def on_step(self, trainer: TrainerView) -> None:
        if self.first_step_sec is not None:
            return
        if trainer.ctx.device.type == "cuda":  # the step's kernels done, not only queued
            torch.cuda.synchronize(trainer.ctx.device)
        self.first_step_sec = time.perf_counter() - self.started
        trainer.events.write("compile", trainer.step, trainer.epoch, self.values("first_step"))  # type: ignore[attr-defined]

    def on_epoch_end(self, trainer: TrainerView, epoch: int) -> None:
        compiles = compile_counts().compiles
        saved = 0
        if trainer.ctx.is_main and compiles > self.saved_compiles:
            saved = self.cache.save()
            self.saved_compiles = compiles
        trainer.events.write("compile", trainer.step, epoch, {**self.values("epoch"), "saved_bytes": saved})

    def on_close(self, trainer: TrainerView) -> None:
        self.in_force.close()

    def values(self, phase: str) -> dict[str, Any]:
        assert self.before is not None, "no model was compiled yet"
        return {
            "phase": phase,
            "mode": self.mode,
            "scope": self.scope,
            "backend": self.backend,
            "options": self.options,
            "shapes": self.shapes,
            "cache_dir": str(self.cache.folder),
            "cache_loaded": self.cache_loaded,
            "first_step_sec": self.first_step_sec,
            **(compile_counts() - self.before).to_dict(),
        }


def build_hooks(config: TrainConfig) -> list[TrainingHook]:
    """The hooks ``config`` asks for, in the order the Trainer calls them (growth before freezing, as a
    widening rebuilds the model that freezing then acts on)."""
    hooks: list[TrainingHook] = []
    if config.grow.start_layers is not None or config.grow.start_width is not None:
        hooks.append(GrowthHook(config))
    hooks.append(FinetuneHook(config))  # also a plain run: finetune.method full without freezing is a no-op
    if config.optim.lr_control == "newbob":
        hooks.append(NewbobHook())
    if config.run.compile != "off":  # last: it compiles the model the other hooks have prepared
        hooks.append(CompileHook(config))
    return hooks


__all__ = [
    "CompileHook",
    "FinetuneHook",
    "GrowthHook",
    "NewbobHook",
    "TrainerView",
    "TrainingHook",
    "build_hooks",
]
