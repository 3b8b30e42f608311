"""Averages of the model's weights kept beside the raw weights: an exponential moving average (EMA) and
icefall's running average of the whole trajectory (``--use-averaged-model``).

``WeightEMA``, after every optimizer step ``s`` (counted from 0, the schedule's clock before the step)::

    s <  ema_start_step:  ema = param                                  (follow the weights while they move fast)
    s >= ema_start_step:  ema = decay * ema + (1 - decay) * param

``RunningAverage`` (icefall's ``model_avg``, ``icefall/checkpoint.py: update_averaged_model``): every
``period`` optimizer steps, once ``n = s + 1`` steps have been taken and ``n = k * period``::

    average = average * (1 - 1 / k) + param / k        (k = n / period)

so after ``k`` averaging points it is the plain mean of the weights at steps ``period, 2 * period, ...,
k * period``. Like icefall's ``model_avg`` it averages every floating-point entry of the state dict,
buffers (batch-norm statistics) included, so that two saved averages combine entry by entry. Two such averages give the mean over the points between them (``models.averaging.average_between``, icefall's
``average_checkpoints_with_averaged_model``), which is how icefall decodes "the averaged model of epochs
E - N to E": the early weights, far from the final ones, drop out of the mean.

The EMA is kept in float32 and the running average in float64 (icefall's choice: a 1/k increment of a long
run is below float32's resolution) on the parameters' device whatever the training precision. Only
the EMA's parameters are averaged (its buffers are copied from the model when it is saved); either way
``state_dict`` loads straight into the same architecture. Steps skipped for a non-finite gradient still update the
averages (towards unchanged weights), which keeps both rules pure functions of the recorded weight
trajectory.

Validation scores the raw weights, and the best checkpoint's CER describes ``model.safetensors``; with
``validation.score_averages`` it also scores each average (``weights_swapped``, one more pass each) and logs
``val_cer_averaged`` / ``val_cer_ema`` beside it. Decoding, evaluation and export load an average with
``--weights`` / ``decoding.weights`` (``run_layout.WEIGHTS``; the file names live there).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor, nn


class _ShadowWeights:
    """A copy of ``model``'s trainable parameters in ``dtype``, saved as a loadable state dict."""

    def __init__(self, model: nn.Module, dtype: torch.dtype) -> None:
        self.shadow: dict[str, Tensor] = {
            name: p.detach().to(dtype).clone() for name, p in self.averaged(model)
        }

    @staticmethod
    def averaged(model: nn.Module) -> list[tuple[str, Tensor]]:
        """What is averaged: the trainable parameters."""
        return [(name, p) for name, p in model.named_parameters() if p.requires_grad]

    def state_dict(self, model: nn.Module, keep_dtype: bool = False) -> dict[str, Tensor]:
        """The model's state dict with averaged parameters, in the parameters' dtypes (for safetensors), or
        in the average's own with ``keep_dtype`` (an exact resume)."""
        state = {name: t.detach() for name, t in model.state_dict().items()}
        for name, average in self.shadow.items():
            state[name] = average if keep_dtype else average.to(state[name].dtype)
        return state

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        missing = sorted(set(self.shadow) - set(state))
        if missing:
            raise KeyError(f"the saved average lacks parameters {missing[:5]} ({len(missing)} in all)")
        for name, average in self.shadow.items():
            average.copy_(state[name])


class WeightEMA(_ShadowWeights):
    def __init__(self, model: nn.Module, decay: float, start_step: int = 0) -> None:
        super().__init__(model, torch.float32)
        self.decay, self.start_step = decay, start_step

    @torch.no_grad()
    def update(self, model: nn.Module, step: int) -> None:
        """After optimizer step ``step`` (0-based); ``model`` is unwrapped (no DDP). Every tensor in one
        foreach call: on a GPU a few multi-tensor kernels a step, not two launches per parameter."""
        pairs = [
            (self.shadow[name], p.detach()) for name, p in model.named_parameters() if name in self.shadow
        ]
        if not pairs:
            return
        shadows, params = (list(side) for side in zip(*pairs, strict=True))
        if step < self.start_step:
            torch._foreach_copy_(shadows, params)
        else:
            torch._foreach_lerp_(shadows, [p.float() for p in params], 1.0 - self.decay)


class RunningAverage(_ShadowWeights):
    """The mean of the weights at every ``period``-th optimizer step so far (module docstring)."""

    def __init__(self, model: nn.Module, period: int) -> None:
        if period < 1:
            raise ValueError(f"the averaging period must be at least 1 optimizer step, got {period}")
        super().__init__(model, torch.float64)
        self.period = period

    @torch.no_grad()
    def update(self, model: nn.Module, step: int) -> None:
        """After optimizer step ``step`` (0-based), so ``step + 1`` steps taken; ``model`` is unwrapped."""
        taken = step + 1
        if taken % self.period:
            return
        weight = self.period / taken  # 1 / k: the k-th point of the mean
        for name, value in self.averaged(model):
            if name in self.shadow:
                self.shadow[name].lerp_(value.detach().double(), weight)

    @staticmethod
    def averaged(model: nn.Module) -> list[tuple[str, Tensor]]:
        """What is averaged: every floating-point entry of the state dict, as icefall's ``model_avg``."""
        return [(name, t) for name, t in model.state_dict().items() if t.is_floating_point()]


@contextmanager
def weights_swapped(model: nn.Module, state: dict[str, Tensor]) -> Iterator[None]:
    """``model`` holds ``state`` (a full state dict, cast into the model's dtypes as loading the saved file
    does) inside the block, and its own tensors again, bit for bit, after it: validation scores an average
    in place, at the cost of one copy of the weights instead of a second model."""
    own = {name: value.detach().clone() for name, value in model.state_dict().items()}
    model.load_state_dict(state, strict=True)
    try:
        yield
    finally:
        model.load_state_dict(own, strict=True)


__all__ = ["RunningAverage", "WeightEMA", "weights_swapped"]
