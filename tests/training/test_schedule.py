from __future__ import annotations

import itertools

import pytest

from asr_pipeline.training.config import OptimConfig
from asr_pipeline.training.schedule import (
    decayed,
    default_decay_steps,
    eden,
    lr_schedule,
    warmup_factor,
    warmup_hold_decay,
)

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


# --- lr_schedule: which schedule the config selects, and its phases in optimizer steps ----------------
def optim(**values) -> OptimConfig:
    return OptimConfig(**values)


def test_without_step_options_the_epoch_schedule_turns_epochs_into_optimizer_steps():
    # 500 epochs of 10 steps: warmup 20 epochs = 200 steps, hold 160 = 1600, decay 320 = 3200.
    schedule = lr_schedule(optim(), peak_lr=PEAK, steps_per_epoch=10)

    assert (schedule.kind, schedule.scaled) == ("epoch", False)
    assert (schedule.warmup_steps, schedule.hold_steps, schedule.decay_steps) == (200, 1600, 3200)


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        (0, PEAK * 1 / 200),  # warmup is interpolated per optimizer step, not per epoch
        (99, PEAK * 100 / 200),
        (199, PEAK),
        (200, PEAK),  # hold: steps 200..1799
        (1799, PEAK),
        (1800, PEAK),  # decay: min + (peak - min) * (1 - (step - 1800) / 3200) ** E
        (2600, MIN + (PEAK - MIN) * (1 - 800 / 3200) ** 2),
        (3400, MIN + (PEAK - MIN) * 0.5**2),
        (4999, MIN + (PEAK - MIN) * (1 / 3200) ** 2),  # the last step of the run
        (5000, MIN),
    ],
)
def test_the_epoch_schedule_matches_its_formula_at_chosen_steps(step, expected):
    schedule = lr_schedule(optim(lr_min=MIN, lr_decay_exponent=2.0), peak_lr=PEAK, steps_per_epoch=10)

    assert schedule(step) == pytest.approx(expected, rel=1e-12)


def test_a_run_shorter_than_warmup_plus_hold_scales_both_to_fill_half_of_it():
    # 10 epochs of 9 steps, 20 + 160 epochs asked: factor 10 / (2 * 180); warmup 0.56 epochs = 5 steps,
    # hold 4.44 epochs = 40 steps, and the other 5 epochs (45 steps) decay.
    schedule = lr_schedule(optim(epochs=10), peak_lr=PEAK, steps_per_epoch=9)

    assert schedule.scaled
    assert (schedule.warmup_steps, schedule.hold_steps, schedule.decay_steps) == (5, 40, 45)
    rates = [schedule(step) for step in range(90)]
    assert rates[4] == PEAK and rates[44] == PEAK, "the peak is reached and held"
    assert rates[89] == pytest.approx(PEAK / 45), "and the last step of the run decays to nearly lr_min"


def test_warmup_plus_hold_exactly_the_run_length_is_scaled_too():
    schedule = lr_schedule(optim(epochs=30, lr_warmup_epochs=10, lr_hold_epochs=20), PEAK, steps_per_epoch=4)

    assert schedule.scaled and (schedule.warmup_steps, schedule.hold_steps, schedule.decay_steps) == (
        20,
        40,
        60,
    )


def test_a_run_longer_than_warmup_plus_hold_is_not_scaled():
    schedule = lr_schedule(optim(epochs=31, lr_warmup_epochs=10, lr_hold_epochs=20), PEAK, steps_per_epoch=4)

    assert not schedule.scaled
    assert (schedule.warmup_steps, schedule.hold_steps, schedule.decay_steps) == (40, 80, 4)


@pytest.mark.parametrize(
    ("steps", "phases"),
    [
        ({"lr_warmup_steps": 7}, (7, 0, 93)),  # unset hold: 0; unset decay: the rest of the run
        ({"lr_hold_steps": 5}, (0, 5, 95)),  # any one step option selects the step schedule
        ({"lr_decay_steps": 30}, (0, 0, 30)),
        ({"lr_warmup_steps": 0}, (0, 0, 100)),  # 0 is "set": the step schedule with no warmup
        ({"lr_warmup_steps": 10, "lr_hold_steps": 20, "lr_decay_steps": 50}, (10, 20, 50)),
    ],
)
def test_any_step_option_selects_the_step_schedule_over_the_epoch_options(steps, phases):
    # 10 epochs of 10 steps; the epoch options are set too and must be ignored.
    config = optim(epochs=10, lr_warmup_epochs=2, lr_hold_epochs=3, **steps)

    schedule = lr_schedule(config, peak_lr=PEAK, steps_per_epoch=10)

    assert schedule.kind == "step" and not schedule.scaled
    assert (schedule.warmup_steps, schedule.hold_steps, schedule.decay_steps) == phases


@pytest.mark.parametrize(("step", "remaining"), [(30, 1.0), (40, 0.75), (50, 0.5), (69, 1 / 40)])
def test_the_step_schedule_decays_with_the_exponent_to_lr_min(step, remaining):
    config = optim(lr_warmup_steps=10, lr_hold_steps=20, lr_decay_steps=40, lr_min=MIN, lr_decay_exponent=3.0)

    schedule = lr_schedule(config, peak_lr=PEAK, steps_per_epoch=10)

    assert schedule(step) == pytest.approx(MIN + (PEAK - MIN) * remaining**3, rel=1e-12)
    assert schedule(70) == MIN


def test_an_lr_min_above_the_peak_is_refused_naming_both_flags():
    with pytest.raises(ValueError, match=r"lr_min=0\.01 is above the peak learning rate 0\.001.*--lr-min"):
        lr_schedule(optim(lr_min=0.01), peak_lr=PEAK, steps_per_epoch=10)


# --- warmup and decay kinds ------------------------------------------------------------------------------
@pytest.mark.parametrize(("step", "factor"), [(0, 0.01 ** (1 - 1 / 10)), (4, 0.01**0.5), (9, 1.0), (12, 1.0)])
def test_exponential_warmup_rises_by_the_same_factor_every_step_from_one_percent(step, factor):
    assert warmup_factor(step, 10, "exponential") == pytest.approx(factor, rel=1e-12)
    ratios = [warmup_factor(s + 1, 10, "exponential") / warmup_factor(s, 10, "exponential") for s in range(9)]
    assert ratios == pytest.approx([100 ** (1 / 10)] * 9)


@pytest.mark.parametrize(
    ("t", "expected"),
    [
        (0, PEAK),
        (10, PEAK * (MIN / PEAK) ** 0.5),
        (20, MIN),
        (40, MIN),
    ],  # geometric to lr_min at D, then held
)
def test_exponential_decay_is_geometric_from_the_peak_to_lr_min(t, expected):
    rate = decayed(t, kind="exponential", peak_lr=PEAK, decay_steps=20, min_lr=MIN)
    assert rate == pytest.approx(expected, rel=1e-12)


def test_exponential_decay_without_lr_min_reaches_one_percent_at_d_and_keeps_falling():
    assert decayed(20, kind="exponential", peak_lr=PEAK, decay_steps=20) == pytest.approx(PEAK * 0.01)
    assert decayed(40, kind="exponential", peak_lr=PEAK, decay_steps=20) == pytest.approx(PEAK * 1e-4)


@pytest.mark.parametrize(("t", "epochs"), [(0, 0.0), (10, 1.0), (30, 3.0), (25, 2.5), (80, 8.0)])
def test_inverse_decay_is_peak_times_one_plus_epochs_since_the_decay_to_minus_the_exponent(t, epochs):
    # 10 steps an epoch; exponent 0.5 is the inverse square root: 3 epochs in, (1 + 3) ** -0.5 is half the peak.
    rate = decayed(t, kind="inverse", peak_lr=PEAK, decay_steps=1, power=0.5, steps_per_epoch=10)
    assert rate == pytest.approx(PEAK * (1 + epochs) ** -0.5, rel=1e-12)
    assert decayed(30, kind="inverse", peak_lr=PEAK, decay_steps=1, power=0.5, steps_per_epoch=10) == PEAK / 2


def test_the_inverse_decay_runs_after_warmup_and_hold_and_stops_at_lr_min():
    common = {
        "peak_lr": PEAK,
        "warmup_steps": 10,
        "hold_steps": 5,
        "decay_steps": 20,
        "decay_kind": "inverse",
    }
    assert warmup_hold_decay(15 + 40, **common, power=1.0, steps_per_epoch=20) == pytest.approx(PEAK / 3)
    assert warmup_hold_decay(10**6, **common, min_lr=MIN, power=1.0, steps_per_epoch=20) == MIN


@pytest.mark.parametrize(
    ("step", "epoch"),
    [(0, 0), (250, 0), (500, 0), (7500, 1), (7500, 3.5), (30_000, 10), (100_000, 40)],
)
def test_eden_matches_icefalls_closed_form_at_chosen_steps_and_epochs(step, epoch):
    batches, epochs, warmup = 7500.0, 3.5, 500
    expected = (
        0.045
        * ((step**2 + batches**2) / batches**2) ** -0.25
        * ((epoch**2 + epochs**2) / epochs**2) ** -0.25
        * (1.0 if step >= warmup else 0.5 + 0.5 * step / warmup)
    )
    rate = eden(step, epoch, peak_lr=0.045, lr_batches=batches, lr_epochs=epochs, warmup_steps=warmup)
    assert rate == pytest.approx(expected, rel=1e-12)


def test_eden_spot_values():
    # s = B and e = E each contribute 2 ** -0.25; warmup starts at half the rate and is whole at W.
    assert eden(7500, 3.5, peak_lr=1.0, lr_batches=7500, lr_epochs=3.5) == pytest.approx(2**-0.5)
    assert eden(0, 0, peak_lr=1.0, lr_batches=7500, lr_epochs=3.5, warmup_steps=500) == 0.5
    assert eden(250, 0, peak_lr=1.0, lr_batches=1e12, lr_epochs=3.5, warmup_steps=500) == pytest.approx(0.75)
    # far out it falls as steps ** -0.5: 4x the steps, half the rate
    far = [eden(s, 0, peak_lr=1.0, lr_batches=10, lr_epochs=3.5) for s in (10**6, 4 * 10**6)]
    assert far[1] / far[0] == pytest.approx(0.5, rel=1e-6)


def test_lr_schedule_under_eden_uses_the_warmup_and_the_epoch_of_the_step():
    config = optim(epochs=50, lr_warmup_steps=40, lr_decay_kind="eden", lr_eden_batches=100, lr_eden_epochs=2)
    schedule = lr_schedule(config, peak_lr=0.045, steps_per_epoch=30)
    for step in (0, 20, 39, 40, 95, 1000):
        expected = eden(step, step // 30, peak_lr=0.045, lr_batches=100, lr_epochs=2, warmup_steps=40)
        assert schedule(step) == pytest.approx(expected, rel=1e-12)


def test_lr_schedule_passes_the_kinds_through():
    config = optim(epochs=10, lr_warmup_steps=10, lr_warmup_kind="exponential", lr_decay_kind="inverse")
    schedule = lr_schedule(config, peak_lr=PEAK, steps_per_epoch=10)
    assert schedule(0) == pytest.approx(PEAK * 0.01 ** (1 - 1 / 10))
    assert schedule(10 + 20) == pytest.approx(PEAK / 3)  # inverse, exponent 1: 2 epochs into the decay


def test_an_unknown_kind_names_the_known_ones():
    with pytest.raises(ValueError, match="linear, exponential"):
        warmup_factor(0, 10, "cosine")
    with pytest.raises(ValueError, match="polynomial, exponential, inverse, eden"):
        decayed(0, kind="cosine", peak_lr=PEAK, decay_steps=10)
