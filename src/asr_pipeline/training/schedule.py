"""Learning-rate schedules as pure functions of the optimizer step.

``step`` counts optimizer updates already taken (0 for the first update), so the value returned is the
rate for update ``step + 1``. Warmup therefore starts at ``peak / warmup_steps`` rather than 0: an
update at rate 0 would be wasted. Being pure, the schedule needs no state of its own in a checkpoint;
the step is enough.

Warmup, hold, decay: the three stages of SpecAugment's schedule (Park et al., 2019), with polynomial
decay in place of exponential so the rate reaches ``min_lr`` at a known step (``E`` the exponent)::

    step < W:                lr = peak * (step + 1) / W
    W <= step < W + H:       lr = peak
    W + H <= step < W+H+D:   lr = min + (peak - min) * (1 - (step - W - H) / D) ** E
    step >= W + H + D:       lr = min

``lr_schedule`` picks W, H and D from the config, as the reference trainer does:

- Step schedule, when any of ``optim.lr_warmup_steps``, ``lr_hold_steps``, ``lr_decay_steps`` is set:
  W and H as given (unset: 0), D as given or else every step the run has left after W + H.
- Epoch schedule otherwise: W = ``lr_warmup_epochs`` and H = ``lr_hold_epochs`` epochs of optimizer
  steps, D the remaining epochs (the rate still changes every step, not once per epoch). A run too short
  for its warmup and hold (W + H epochs >= ``epochs``, e.g. ``--epochs 10`` with the default 20 + 160)
  would never reach or never leave the peak, so both are scaled by the same factor to fill half of the
  run and the decay takes the other half: 10 epochs give 0.56 warmup, 4.44 hold and 5 decay epochs.
  The scaled phases are reported (``LRSchedule.scaled``) and printed by the loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from asr_pipeline.training.config import OptimConfig


def warmup_hold_decay(
    step: int,
    *,
    peak_lr: float,
    warmup_steps: int,
    hold_steps: int = 0,
    decay_steps: int,
    min_lr: float = 0.0,
    power: float = 1.0,
) -> float:
    """The rate for optimizer update ``step + 1``; ``power=1`` decays linearly, ``power>1`` polynomially."""
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    if step < warmup_steps:
        return peak_lr * (step + 1) / warmup_steps
    step -= warmup_steps
    if step < hold_steps:
        return peak_lr
    step -= hold_steps
    if step < decay_steps:
        remaining = 1.0 - step / decay_steps
        return min_lr + (peak_lr - min_lr) * remaining**power
    return min_lr


def default_decay_steps(total_steps: int, warmup_steps: int, hold_steps: int) -> int:
    """Decay over whatever the run has left after warmup and hold (at least one step)."""
    return max(1, total_steps - warmup_steps - hold_steps)


@dataclass(frozen=True)
class LRSchedule:
    """A resolved warmup-hold-decay schedule in optimizer steps; call it with a step for its rate."""

    kind: str  # "step" or "epoch": which options chose the phases
    peak_lr: float
    min_lr: float
    warmup_steps: int
    hold_steps: int
    decay_steps: int
    exponent: float
    scaled: bool = False  # epoch schedule only: warmup and hold were shrunk to fit a short run

    def __call__(self, step: int) -> float:
        return warmup_hold_decay(
            step,
            peak_lr=self.peak_lr,
            warmup_steps=self.warmup_steps,
            hold_steps=self.hold_steps,
            decay_steps=self.decay_steps,
            min_lr=self.min_lr,
            power=self.exponent,
        )


def lr_schedule(optim: OptimConfig, peak_lr: float, steps_per_epoch: int) -> LRSchedule:
    """The schedule ``optim`` describes for a run of ``optim.epochs`` epochs of ``steps_per_epoch``
    optimizer steps (see the module docstring for which schedule and how a short run is fitted)."""
    if steps_per_epoch < 1:
        raise ValueError(f"steps_per_epoch must be >= 1, got {steps_per_epoch}")
    if optim.lr_min > peak_lr:
        raise ValueError(
            f"lr_min={optim.lr_min} is above the peak learning rate {peak_lr}; the decay would raise the "
            "rate: lower optim.lr_min (--lr-min) or set a higher optim.learning_rate (--learning-rate)"
        )
    total_steps = optim.epochs * steps_per_epoch
    common = {"peak_lr": peak_lr, "min_lr": optim.lr_min, "exponent": optim.lr_decay_exponent}
    if optim.uses_step_schedule:
        warmup, hold = optim.lr_warmup_steps or 0, optim.lr_hold_steps or 0
        decay = optim.lr_decay_steps or default_decay_steps(total_steps, warmup, hold)
        return LRSchedule("step", warmup_steps=warmup, hold_steps=hold, decay_steps=decay, **common)
    warmup_epochs, hold_epochs = float(optim.lr_warmup_epochs), float(optim.lr_hold_epochs)
    scaled = warmup_epochs + hold_epochs >= optim.epochs
    if scaled:
        factor = optim.epochs / (2 * (warmup_epochs + hold_epochs))
        warmup_epochs, hold_epochs = warmup_epochs * factor, hold_epochs * factor
    warmup = round(warmup_epochs * steps_per_epoch)
    hold = round(hold_epochs * steps_per_epoch)
    decay = default_decay_steps(total_steps, warmup, hold)
    return LRSchedule(
        "epoch", warmup_steps=warmup, hold_steps=hold, decay_steps=decay, scaled=scaled, **common
    )


__all__ = ["LRSchedule", "default_decay_steps", "lr_schedule", "warmup_hold_decay"]
