"""training.ema: the weights' moving average follows the weights before ``start_step``, then averages with
``decay``; it is kept in float32, saves as a loadable state dict and refuses a saved average that lacks one."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from asr_pipeline.training.ema import WeightEMA


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
    with pytest.raises(KeyError, match=r"the saved EMA lacks parameters \['1.bias'\] \(1 in all\)"):
        restored.load_state_dict(partial)
