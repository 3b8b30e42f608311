"""training.ema: the weights' moving average follows the weights before ``start_step``, then averages with
``decay``; it is kept in float32, saves as a loadable state dict and refuses a saved average that lacks one."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor, nn

from asr_pipeline.models.averaging import average_between
from asr_pipeline.training.ema import RunningAverage, WeightEMA


def tiny_model() -> nn.Module:
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(1.0)
    return model


def set_weights(model: nn.Module, value: float) -> None:
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(value)


def test_before_start_step_the_average_is_the_weights_then_it_moves_by_one_minus_decay():
    model = tiny_model()
    ema = WeightEMA(model, decay=0.9, start_step=2)

    set_weights(model, 5.0)
    ema.update(model, step=1)  # before start_step: copy
    assert torch.equal(ema.shadow["0.weight"], torch.full((2, 2), 5.0))
    set_weights(model, 15.0)
    ema.update(model, step=2)  # 0.9 * 5 + 0.1 * 15 = 6
    ema.update(model, step=3)  # 0.9 * 6 + 0.1 * 15 = 6.9
    torch.testing.assert_close(ema.shadow["0.bias"], torch.full((2,), 6.9))


def test_the_average_is_float32_and_saves_in_the_parameters_dtype_with_the_models_buffers():
    model = tiny_model().to(torch.bfloat16)
    ema = WeightEMA(model, decay=0.999)
    set_weights(model, 2.0)
    ema.update(
        model, step=0
    )  # 0.999 + 0.001 * 2 = 1.001: below bfloat16's resolution near 1, kept in float32

    assert ema.shadow["0.weight"].dtype == torch.float32
    torch.testing.assert_close(ema.shadow["0.weight"], torch.full((2, 2), 1.001))
    state = ema.state_dict(model)
    assert set(state) == set(
        model.state_dict()
    )  # running_mean/var and num_batches_tracked come from the model
    assert state["0.weight"].dtype == torch.bfloat16
    fresh = tiny_model().to(torch.bfloat16)
    fresh.load_state_dict(state)


def test_frozen_parameters_are_not_averaged():
    model = tiny_model()
    model[1].requires_grad_(False)

    assert set(WeightEMA(model, decay=0.5).shadow) == {"0.weight", "0.bias"}


def test_a_saved_average_loads_back_and_one_missing_a_parameter_is_refused_naming_it():
    model = tiny_model()
    saved = WeightEMA(model, decay=0.5)
    set_weights(model, 3.0)
    saved.update(model, step=0)  # 0.5 * 1 + 0.5 * 3 = 2
    restored = WeightEMA(tiny_model(), decay=0.5)

    restored.load_state_dict(saved.state_dict(model))
    assert torch.equal(restored.shadow["1.weight"], torch.full((2,), 2.0))
    partial = {k: v for k, v in saved.state_dict(model).items() if k != "1.bias"}
    with pytest.raises(KeyError, match=r"the saved average lacks parameters \['1.bias'\] \(1 in all\)"):
        restored.load_state_dict(partial)


# --- icefall's running average (--use-averaged-model) ---------------------------------------------------
def trajectory_model() -> nn.Module:
    return nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))


def take_steps(
    model: nn.Module, average: RunningAverage, steps: range, generator: torch.Generator
) -> dict[int, dict[str, Tensor]]:
    """Random weights (and batch-norm statistics) after each optimizer step, the average updated after
    each; returns the model's state by steps taken."""
    seen = {}
    for step in steps:
        with torch.no_grad():
            for value in model.state_dict().values():
                if value.is_floating_point():
                    value.copy_(torch.randn(value.shape, generator=generator))
        average.update(model, step)
        seen[step + 1] = {k: v.double().clone() for k, v in model.state_dict().items()}
    return seen


def test_the_running_average_is_the_mean_of_the_weights_at_every_period_th_step():
    model = trajectory_model()
    average = RunningAverage(model, period=3)

    # points after 3, 6 and 9 steps taken; 10 is not one
    seen = take_steps(model, average, range(10), torch.Generator().manual_seed(0))

    for name in ("0.weight", "0.bias", "1.weight", "1.running_mean", "1.running_var"):
        mean = (seen[3][name] + seen[6][name] + seen[9][name]) / 3
        torch.testing.assert_close(average.shadow[name], mean, rtol=0, atol=1e-12)
    assert average.shadow["0.weight"].dtype == torch.float64
    assert "1.num_batches_tracked" not in average.shadow  # an integer counter: taken from the model


def test_a_resumed_running_average_continues_bit_for_bit():
    model = trajectory_model()
    straight = RunningAverage(model, period=2)
    take_steps(model, straight, range(9), torch.Generator().manual_seed(1))

    generator = torch.Generator().manual_seed(1)  # the same weights, interrupted after 5 steps
    first = RunningAverage(model, period=2)
    take_steps(model, first, range(5), generator)
    resumed = RunningAverage(trajectory_model(), period=2)
    resumed.load_state_dict(first.state_dict(model, keep_dtype=True))
    take_steps(model, resumed, range(5, 9), generator)

    for name, value in straight.shadow.items():
        assert torch.equal(resumed.shadow[name], value), name


def test_the_average_between_two_saved_averages_is_the_mean_of_the_points_between_them():
    model = trajectory_model()
    average = RunningAverage(model, period=4)
    seen, saved, generator = {}, {}, torch.Generator().manual_seed(2)
    for step in range(20):
        seen |= take_steps(model, average, range(step, step + 1), generator)
        saved[step + 1] = {k: v.clone() for k, v in average.state_dict(model, keep_dtype=True).items()}

    # Steps 9 and 19 round down to the points they hold: 8 and 16, so the points 12 and 16 lie between.
    between = average_between(saved[9], 9, saved[19], 19, period=4)

    for name in ("0.weight", "1.running_var"):
        torch.testing.assert_close(between[name], (seen[12][name] + seen[16][name]) / 2, rtol=0, atol=1e-12)
    assert torch.equal(between["1.num_batches_tracked"], saved[19]["1.num_batches_tracked"])
    with pytest.raises(ValueError, match="no averaging point between step 9 and step 11"):
        average_between(saved[9], 9, saved[11], 11, period=4)


def test_an_averaging_period_below_one_step_is_refused():
    with pytest.raises(ValueError, match="at least 1 optimizer step, got 0"):
        RunningAverage(trajectory_model(), period=0)
