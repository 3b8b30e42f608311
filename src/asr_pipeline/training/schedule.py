"""Learning-rate schedules as pure functions of the optimizer step.

``step`` counts optimizer updates already taken (0 for the first update), so the value returned is the
rate for update ``step + 1``. Warmup therefore starts at ``peak / warmup_steps`` rather than 0: an
update at rate 0 would be wasted. Being pure, the schedule needs no state of its own in a checkpoint;
the step is enough.

Warmup, hold, decay: the three stages of SpecAugment's schedule (Park et al., 2019), with linear or
polynomial decay in place of exponential so the rate reaches ``min_lr`` at a known step::

    step < W:                lr = peak * (step + 1) / W
    W <= step < W + H:       lr = peak
    W + H <= step < W+H+D:   lr = min + (peak - min) * (1 - (step - W - H) / D) ** power
    step >= W + H + D:       lr = min
"""

from __future__ import annotations


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


__all__ = ["default_decay_steps", "warmup_hold_decay"]
