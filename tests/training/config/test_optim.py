"""training.config.optim: the optimizer section refuses settings that contradict each other, naming the fix;
any ``lr_*_steps`` switches to the step schedule; the regularization section bounds its rates."""

from __future__ import annotations

import pytest

from asr_pipeline.training.config.optim import OptimConfig, RegularizationConfig


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"sgd_momentum": 1.0}, r"sgd_momentum must be in \[0, 1\), got 1.0"),
        (
            {"sgd_nesterov": True, "sgd_momentum": 0.0},
            r"sgd_nesterov needs momentum: set sgd_momentum \(--sgd-momentum\) above 0",
        ),
        ({"scaled_adam_param_max_rms": 1e-5, "scaled_adam_param_min_rms": 1e-5}, r"must be above"),
        ({"learning_rate": 1e-4, "lr_min": 1e-3}, r"lr_min=0.001 is above the peak learning_rate=0.0001"),
        ({"ema_decay": 1.0}, r"ema_decay must be in \(0, 1\), e.g. 0.999, got 1.0"),
        ({"gradient_clip_value": 1.0}, r"clip by one of them: set gradient_clip_norm to null"),
        ({"epochs": 0}, r"epochs must be > 0"),
        ({"weight_decay": -0.1}, r"weight_decay must be >= 0"),
    ],
)
def test_the_optimizer_section_refuses_contradicting_settings_naming_the_fix(fields, message):
    with pytest.raises(ValueError, match=message):
        OptimConfig(**fields)


def test_clipping_by_value_alone_is_accepted():
    assert OptimConfig(gradient_clip_value=1.0, gradient_clip_norm=None).gradient_clip_value == 1.0


@pytest.mark.parametrize("field", ["lr_warmup_steps", "lr_hold_steps", "lr_decay_steps"])
def test_any_step_option_switches_to_the_step_schedule(field):
    assert not OptimConfig().uses_step_schedule
    assert OptimConfig(**{field: 10}).uses_step_schedule


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"layer_drop": 1.0}, r"layer_drop must be in \[0, 1\), got 1.0"),
        ({"weight_noise_std": -0.1}, r"weight_noise_std must be >= 0"),
        (
            {"cr_time_mask_ratio": 7.0},
            r"cr_time_mask_ratio=7.0 would let the time masks cover 1.05 .* at most 6.67",
        ),
        ({"weight_noise_families": ["attention"]}, r"weight_noise_families must name some of linear, conv"),
        ({"weight_noise_families": []}, r"weight_noise_families must name some of"),
    ],
)
def test_the_regularization_section_bounds_its_rates_and_families(fields, message):
    with pytest.raises(ValueError, match=message):
        RegularizationConfig(**fields)
