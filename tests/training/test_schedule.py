from __future__ import annotations

import itertools

import pytest

from asr_pipeline.training.schedule import default_decay_steps, warmup_hold_decay

PEAK, MIN = 1e-3, 1e-5
SCHEDULE = {"peak_lr": PEAK, "warmup_steps": 10, "hold_steps": 5, "decay_steps": 20, "min_lr": MIN}


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        (0, PEAK * 1 / 10),  # warmup: peak * (step + 1) / W
        (4, PEAK * 5 / 10),
        (9, PEAK),  # the last warmup step reaches the peak
        (10, PEAK),  # hold: steps 10..14
        (14, PEAK),
        (15, PEAK),  # decay starts at the peak: (1 - 0/20) ** 1
        (20, MIN + (PEAK - MIN) * (1 - 5 / 20)),
        (25, MIN + (PEAK - MIN) * 0.5),
        (34, MIN + (PEAK - MIN) * (1 - 19 / 20)),
        (35, MIN),  # after W + H + D steps: the floor, forever
        (10_000, MIN),
    ],
)
def test_warmup_hold_linear_decay_at_chosen_steps(step, expected):
    assert warmup_hold_decay(step, **SCHEDULE) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(("step", "remaining"), [(15, 1.0), (20, 0.75), (25, 0.5), (30, 0.25)])
def test_polynomial_decay_raises_the_remaining_fraction_to_the_power(step, remaining):
    assert warmup_hold_decay(step, **SCHEDULE, power=2.0) == pytest.approx(MIN + (PEAK - MIN) * remaining**2)


def test_without_warmup_or_hold_the_first_step_is_the_peak():
    assert warmup_hold_decay(0, peak_lr=PEAK, warmup_steps=0, decay_steps=10) == PEAK


def test_the_rate_rises_during_warmup_and_never_rises_after_it():
    rates = [warmup_hold_decay(step, **SCHEDULE) for step in range(60)]

    assert all(a < b for a, b in itertools.pairwise(rates[:10]))
    assert all(a >= b for a, b in itertools.pairwise(rates[9:]))


def test_a_negative_step_is_refused():
    with pytest.raises(ValueError, match="step"):
        warmup_hold_decay(-1, **SCHEDULE)


def test_default_decay_covers_the_steps_left_after_warmup_and_hold():
    assert default_decay_steps(total_steps=100, warmup_steps=10, hold_steps=5) == 85
    assert default_decay_steps(total_steps=10, warmup_steps=10, hold_steps=5) == 1
