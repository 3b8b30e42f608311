"""One rank's optimizer side of training: the optimizer (``optim.optimizer``, ``training.optimizers``), the
f16 loss scaler, gradient clipping, the learning rate (a step schedule or validation-driven Newbob control,
optionally scaled with the batch) and the weight averages (the EMA, icefall's running average), behind
``Optimization``.

The learning rate of optimizer update ``step + 1`` in (0-based) epoch ``epoch``:

- ``optim.lr_control: schedule`` (default): ``training.schedule``'s warmup -> hold -> decay, a pure
  function of the step;
- ``optim.lr_control: newbob``: the epoch's rate from ``training.lr_control`` (``NewbobControl``, epochs
  counting from 1, so the rate of ``learning_rate_for_epoch(epoch + 1)``), times the schedule's warmup ramp
  ``min(1, (step + 1) / W)``, so Newbob can follow a warmup. The schedule's hold and decay are unused: the
  control decides every change after warmup. The control learns each epoch's validation score through
  ``record_validation`` (the epoch loop calls it on every rank with rank 0's scores) and its state goes into
  the checkpoint, so a resumed run continues the same rates.

With ``optim.lr_scale_with_batch: N`` the rate above is multiplied by the step's utterances (summed over
ranks and accumulated micro-batches) / N (``optimizers.batch_scaled_lr``): under adaptive batches each step
sees a different number. The rate logged is the one applied (``applied_lr``).

Under ``scaled_adam`` the optimizer clips by its own rule (the median recent norm), so the norm clip
(``gradient_clip_norm``) only measures; a value clip still applies.

Gradients are all-reduced before ``step``, so every rank measures the same norm and takes (or skips, for a
non-finite norm) the same step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor, nn

from asr_pipeline.run_layout import AVERAGE_FILE, EMA_FILE
from asr_pipeline.training.config import OptimConfig, TrainConfig, peak_learning_rate
from asr_pipeline.training.ema import RunningAverage, WeightEMA
from asr_pipeline.training.growth import widen_ema, widen_optimizer
from asr_pipeline.training.lr_control import Decision, NewbobControl
from asr_pipeline.training.optimizers import batch_scaled_lr, build_optimizer, decay_groups
from asr_pipeline.training.scaled_adam import ScaledAdam
from asr_pipeline.training.schedule import LRSchedule, lr_schedule


def build(model: nn.Module, optim: OptimConfig, lr: float) -> torch.optim.Optimizer:
    """``optim.optimizer`` over ``model`` with ``optim``'s options."""
    options: dict[str, Any] = {}
    if optim.optimizer == "sgd":
        options = {"momentum": optim.sgd_momentum, "nesterov": optim.sgd_nesterov}
    elif optim.optimizer == "scaled_adam":
        options = {
            "clipping_scale": optim.scaled_adam_clipping_scale,
            "scalar_lr_scale": optim.scaled_adam_scalar_lr_scale,
            "param_min_rms": optim.scaled_adam_param_min_rms,
            "param_max_rms": optim.scaled_adam_param_max_rms,
        }
    return build_optimizer(optim.optimizer, model, lr=lr, weight_decay=optim.weight_decay, options=options)


class Optimization:
    """The optimizer over ``model`` (unwrapped: DDP wraps the same parameters), its scaler, rate and EMA."""

    def __init__(
        self, model: nn.Module, config: TrainConfig, device: torch.device, steps_per_epoch: int
    ) -> None:
        optim = config.optim
        self.config = optim
        self.peak_lr = peak_learning_rate(config)
        # f16 only: its 5 exponent bits underflow small gradients, so the loss is scaled up before
        # backward and the gradients unscaled before clipping; bf16 has float32's range and needs none.
        self.scaler = torch.amp.GradScaler(device.type, enabled=config.run.precision == "f16")
        self.optimizer = self._build(model)
        # Plans differ a little per epoch under a frames budget; epoch 0's length sets the schedule's
        # epoch length (warmup/hold epochs of the epoch schedule, the decay horizon of both).
        self.schedule: LRSchedule = lr_schedule(optim, self.peak_lr, max(1, steps_per_epoch))
        self.control = NewbobControl(optim.newbob, self.peak_lr) if optim.lr_control == "newbob" else None
        self.ema = WeightEMA(model, optim.ema_decay, optim.ema_start_step) if optim.ema_decay else None
        self.average = RunningAverage(model, optim.average_period) if optim.use_averaged_model else None
        self.grad_norm = torch.tensor(0.0)  # the last step's, before clipping
        self.applied_lr: float | None = None  # the last update's rate, batch scaling included

    def rebuild(self, old_model: nn.Module, model: nn.Module, carry: bool) -> None:
        """Optimize ``model``, a widened rebuild of ``old_model`` (training.growth), from now on: a new
        optimizer with the same settings, and a new EMA; with ``carry``, the old state copied into them
        (``growth.widen_optimizer``, ``growth.widen_ema``)."""
        old = self.optimizer
        self.optimizer = self._build(model)
        if carry:
            widen_optimizer(old, self.optimizer, old_model, model)
        if self.ema is not None:
            self.ema = (
                widen_ema(self.ema, model) if carry else WeightEMA(model, self.ema.decay, self.ema.start_step)
            )

    def _build(self, model: nn.Module) -> torch.optim.Optimizer:
        optimizer = build(model, self.config, self.peak_lr)
        if isinstance(optimizer, ScaledAdam) and self.scaler.is_enabled():
            # Its step count counts the calls it skips on the device, and the f16 scaler skips routinely
            # (its first steps, each growth interval): the host reads the verdict instead.
            optimizer.device_skip = False
        return optimizer

    def configure(self, optim: OptimConfig) -> None:
        """An epoch's clipping and weight decay (``train.schedule``); the rate's options stay the run's."""
        self.config = optim
        self.optimizer.param_groups[0]["weight_decay"] = optim.weight_decay  # group 0: the decayed one

    def learning_rate(self, step: int, epoch: int) -> float:
        """The rate of optimizer update ``step + 1`` (0-based ``step``) in 0-based ``epoch``."""
        if self.control is None:
            return self.schedule(step)
        warmup = self.schedule.warmup_steps
        ramp = min(1.0, (step + 1) / warmup) if warmup else 1.0
        return self.control.learning_rate_for_epoch(epoch + 1) * ramp

    def scale(self, loss: Tensor) -> Tensor:
        """The loss to call ``backward`` on (scaled up under f16)."""
        return self.scaler.scale(loss)

    def applied_rate(self, step: int, epoch: int, batch_size: float | None = None) -> float:
        """The rate update ``step + 1`` applies: ``learning_rate``, scaled by ``batch_size`` (utterances,
        all ranks) / ``optim.lr_scale_with_batch`` when that is set."""
        rate = self.learning_rate(step, epoch)
        reference = self.config.lr_scale_with_batch
        if reference is None:
            return rate
        if batch_size is None:
            raise ValueError(
                "optim.lr_scale_with_batch is set but the step was not told its batch size: pass batch_size"
            )
        return batch_scaled_lr(rate, batch_size, reference)

    def logged_rate(self, steps_taken: int, epoch: int) -> float:
        """The rate to log once ``steps_taken`` updates ran: under batch scaling the last one applied (it
        depends on that batch), else the schedule's rate of the last update."""
        if self.config.lr_scale_with_batch is not None and self.applied_lr is not None:
            return self.applied_lr
        return self.learning_rate(max(steps_taken - 1, 0), epoch)

    def step(self, model: nn.Module, step: int, epoch: int, batch_size: float | None = None) -> Tensor:
        """Unscale, measure and clip the gradients, and update unless their norm is non-finite; then zero
        them and update the averages. ``batch_size``: the step's utterances over all ranks (needed only under
        ``optim.lr_scale_with_batch``). Returns whether the update was taken: a 0-d bool on the device.

        An optimizer that skips on the device (``skips_on_device``: torch's ``fused=True`` Adam and AdamW,
        and ScaledAdam on CUDA but under f16) is told the verdict as a tensor (its ``found_inf``, as ``GradScaler`` tells
        it) and skips the update there (see each for its step count). Nothing is read back to the host, so
        the CPU queues the update and the next batch's forward while the GPU still runs this backward.
        The others read the norm here. The rate logged under ``lr_scale_with_batch`` (``applied_lr``) is
        then the last step's, skipped or not."""
        self.scaler.unscale_(self.optimizer)
        # inf: measure the norm, clip nothing (scaled_adam clips by its own median rule).
        clip = (self.config.optimizer != "scaled_adam" and self.config.gradient_clip_norm) or math.inf
        self.grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        if (
            self.config.gradient_clip_value is not None
        ):  # after measuring: the logged norm is the unclipped one
            torch.nn.utils.clip_grad_value_(model.parameters(), self.config.gradient_clip_value)
        applied = torch.isfinite(self.grad_norm)  # (,)
        if self.skips_on_device:
            # The norm's verdict, f16 included (the gradients are unscaled already): a norm that overflows
            # while every gradient is finite skips the step too, which the scaler's own inf check would not.
            self._set_rate(step, epoch, batch_size)
            self.optimizer.found_inf = (~applied).float()  # type: ignore[attr-defined]  # 1.0: skip
            try:
                self.optimizer.step()
            finally:
                del self.optimizer.found_inf  # type: ignore[attr-defined]  # as GradScaler leaves it
        elif bool(applied):
            self._set_rate(step, epoch, batch_size)
            self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        if self.ema is not None:
            self.ema.update(model, step)
        if self.average is not None:
            self.average.update(model, step)
        return applied

    @property
    def skips_on_device(self) -> bool:
        """Whether the optimizer takes a skip verdict as a tensor (``found_inf``), as torch's fused
        optimizers do for ``GradScaler``."""
        return bool(getattr(self.optimizer, "_step_supports_amp_scaling", False))

    def _set_rate(self, step: int, epoch: int, batch_size: float | None) -> None:
        rate = self.applied_rate(step, epoch, batch_size)
        for group in self.optimizer.param_groups:
            group["lr"] = rate
        self.applied_lr = rate

    def averages(self, model: nn.Module) -> dict[str, dict[str, Tensor]]:
        """The weight averages kept, as file name -> state dict for a checkpoint: the EMA in the
        parameters' dtypes, the running average in float64 (an exact resume)."""
        files = {}
        if self.ema is not None:
            files[EMA_FILE] = self.ema.state_dict(model)
        if self.average is not None:
            files[AVERAGE_FILE] = self.average.state_dict(model, keep_dtype=True)
        return files

    def load_averages(self, load: Callable[[str], dict[str, Tensor]]) -> None:
        """The averages back from a checkpoint, ``load(file name)`` reading one of its weight files."""
        if self.ema is not None:
            self.ema.load_state_dict(load(EMA_FILE))
        if self.average is not None:
            self.average.load_state_dict(load(AVERAGE_FILE))

    def record_validation(self, epoch: int, scores: Mapping[str, Any]) -> Decision | None:
        """Newbob: 0-based ``epoch``'s end-of-epoch validation scores (every rank the same ones); returns
        the decision on the next epoch's rate. None under the step schedule, which ignores scores."""
        if self.control is None:
            return None
        return self.control.record(epoch + 1, scores)

    def state_dict(self) -> dict[str, Any]:
        """The resumable state (each average is saved as its own weights file: ``averages``)."""
        return {
            "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict(),
            "lr_control": None if self.control is None else self.control.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        # An f32/bf16 run saved a disabled scaler's empty state: resumed in f16, the scaler starts fresh.
        if state["scaler"]:
            self.scaler.load_state_dict(state["scaler"])
        # A checkpoint from before lr_control has none; the config check refused changing the control.
        if self.control is not None and state.get("lr_control"):
            self.control.load_state_dict(state["lr_control"])


__all__ = ["Optimization", "build", "decay_groups"]
