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

Kinds (``optim.lr_warmup_kind``, ``optim.lr_decay_kind``; ``t`` the steps since the decay began):

- warmup ``linear`` (above) or ``exponential``: ``peak * r ** (1 - (step + 1) / W)``, the same factor every
  step from ``r = EXPONENTIAL_WARMUP_START`` (1 % of the peak) up to the peak, so the rate's early doublings
  are as long as its late ones (a linear ramp spends its first steps many times below the peak);
- decay ``polynomial`` (above), ``exponential``: ``peak * q ** (t / D)``, ``q = min / peak`` (1 % without a
  floor), reaching ``min`` at D and never going below it; ``inverse``: ``peak * (1 + t / steps_per_epoch) **
  -E`` with the epochs since the decay began (``E = 0.5``: inverse square root), the reference trainer's
  "inverse epoch decay" meaning of ``--lr-decay-exponent``; and ``eden``, which owns the whole curve:

Eden (icefall's ``zipformer/optim.py``; Yao et al. 2023, the Zipformer paper's schedule), ``s`` the step,
``e`` the (0-based) epoch ``s // steps_per_epoch``::

    lr = peak * ((s^2 + B^2) / B^2) ** -0.25 * ((e^2 + E^2) / E^2) ** -0.25 * warmup
    warmup = 0.5 + 0.5 * s / W  for s < W, else 1

with ``B = lr_batches`` and ``E = lr_epochs``: flat at first, then falling as ``s ** -0.5`` overall once both
``s >> B`` and ``e >> E``. Under eden, W is the schedule's warmup and hold, decay and ``lr_min`` play no part.
"""

from __future__ import annotations

from dataclasses import dataclass

from asr_pipeline.training.config import OptimConfig

WARMUP_KINDS = ("linear", "exponential")
DECAY_KINDS = ("polynomial", "exponential", "inverse", "eden")
EXPONENTIAL_WARMUP_START = 0.01  # the exponential warmup's first rate, as a share of the peak
EXPONENTIAL_DECAY_FLOOR = 0.01  # the exponential decay's rate after D steps when there is no lr_min
EDEN_WARMUP_START = 0.5  # icefall's Eden starts its warmup at half the rate


def warmup_factor(step: int, warmup_steps: int, kind: str = "linear") -> float:
    """The share of the peak at optimizer update ``step + 1`` of a ``warmup_steps`` warmup (1 after it)."""
    if step >= warmup_steps:
        return 1.0
    if kind == "linear":
        return (step + 1) / warmup_steps
    if kind == "exponential":
        return EXPONENTIAL_WARMUP_START ** (1.0 - (step + 1) / warmup_steps)
    raise ValueError(f"unknown warmup kind {kind!r}: pick one of {', '.join(WARMUP_KINDS)}")


def decayed(
    t: int,
    *,
    kind: str,
    peak_lr: float,
    decay_steps: int,
    min_lr: float = 0.0,
    power: float = 1.0,
    steps_per_epoch: int = 1,
) -> float:
    """The rate ``t`` steps after the decay began (module docstring; not eden, which is its own curve)."""
    if kind == "polynomial":
        if t >= decay_steps:
            return min_lr
        return min_lr + (peak_lr - min_lr) * (1.0 - t / decay_steps) ** power
    if kind == "exponential":
        ratio = min_lr / peak_lr if min_lr > 0 else EXPONENTIAL_DECAY_FLOOR
        return max(min_lr, peak_lr * ratio ** (t / decay_steps))
    if kind == "inverse":
        return max(min_lr, peak_lr * (1.0 + t / steps_per_epoch) ** -power)
    raise ValueError(f"unknown decay kind {kind!r}: pick one of {', '.join(DECAY_KINDS)}")


def eden(
    step: int, epoch: float, *, peak_lr: float, lr_batches: float, lr_epochs: float, warmup_steps: int = 0
) -> float:
    """icefall's Eden rate at ``step`` (updates taken) in 0-based ``epoch`` (module docstring)."""
    if step < 0 or epoch < 0:
        raise ValueError(f"step and epoch must be >= 0, got {step}, {epoch}")
    batch_factor = ((step**2 + lr_batches**2) / lr_batches**2) ** -0.25
    epoch_factor = ((epoch**2 + lr_epochs**2) / lr_epochs**2) ** -0.25
    warmup = (
        1.0 if step >= warmup_steps else EDEN_WARMUP_START + (1 - EDEN_WARMUP_START) * step / warmup_steps
    )
    return peak_lr * batch_factor * epoch_factor * warmup


def warmup_hold_decay(
    step: int,
    *,
    peak_lr: float,
    warmup_steps: int,
    hold_steps: int = 0,
    decay_steps: int,
    min_lr: float = 0.0,
    power: float = 1.0,
    warmup_kind: str = "linear",
    decay_kind: str = "polynomial",
    steps_per_epoch: int = 1,
) -> float:
    """The rate for optimizer update ``step + 1``; ``power=1`` decays linearly, ``power>1`` polynomially
    (under ``decay_kind="inverse"``, ``power`` is the exponent of the epochs since the decay began)."""
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    if step < warmup_steps:
        return peak_lr * warmup_factor(step, warmup_steps, warmup_kind)
    step -= warmup_steps
    if step < hold_steps:
        return peak_lr
    return decayed(
        step - hold_steps,
        kind=decay_kind,
        peak_lr=peak_lr,
        decay_steps=decay_steps,
        min_lr=min_lr,
        power=power,
        steps_per_epoch=steps_per_epoch,
    )


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
    warmup_kind: str = "linear"
    decay_kind: str = "polynomial"
    steps_per_epoch: int = 1  # the inverse decay's and eden's epoch
    lr_batches: float = 7500.0  # eden only
    lr_epochs: float = 3.5  # eden only

    def __call__(self, step: int) -> float:
        if self.decay_kind == "eden":
            return eden(
                step,
                step // self.steps_per_epoch,
                peak_lr=self.peak_lr,
                lr_batches=self.lr_batches,
                lr_epochs=self.lr_epochs,
                warmup_steps=self.warmup_steps,
            )
        return warmup_hold_decay(
            step,
            peak_lr=self.peak_lr,
            warmup_steps=self.warmup_steps,
            hold_steps=self.hold_steps,
            decay_steps=self.decay_steps,
            min_lr=self.min_lr,
            power=self.exponent,
            warmup_kind=self.warmup_kind,
            decay_kind=self.decay_kind,
            steps_per_epoch=self.steps_per_epoch,
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
    common = {
        "peak_lr": peak_lr,
        "min_lr": optim.lr_min,
        "exponent": optim.lr_decay_exponent,
        "steps_per_epoch": steps_per_epoch,
        "warmup_kind": optim.lr_warmup_kind,
        "decay_kind": optim.lr_decay_kind,
        "lr_batches": optim.lr_eden_batches,
        "lr_epochs": optim.lr_eden_epochs,
    }
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


__all__ = [
    "DECAY_KINDS",
    "WARMUP_KINDS",
    "LRSchedule",
    "decayed",
    "default_decay_steps",
    "eden",
    "lr_schedule",
    "warmup_factor",
    "warmup_hold_decay",
]
