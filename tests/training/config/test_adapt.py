"""training.config.adapt: growth needs a starting depth or width before its epochs, and fine-tuning refuses
freezing options that contradict its method."""

from __future__ import annotations

import pytest

from asr_pipeline.training.config.adapt import FinetuneConfig, GrowConfig


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"width_epochs": [2]}, r"width_epochs needs start_width"),
        (
            {"start_width": 1.0, "width_epochs": [2]},
            r"start_width is a fraction of the model's width in \(0, 1\)",
        ),
        ({"start_width": 0.5, "width_epochs": []}, r"width_epochs must list the epochs .* got \[\]"),
        ({"epochs": [2]}, r"epochs and layers_per_growth need start_layers"),
        ({"start_layers": 4, "epochs": [1, 3]}, r"epochs must list the epochs .*from 2 on"),
        ({"start_layers": 4, "epochs": [3, 2]}, r"increasing"),
        ({"start_layers": 0, "epochs": [2]}, r"start_layers must be > 0"),
    ],
)
def test_growth_without_a_start_or_with_epochs_out_of_order_is_refused(fields, message):
    with pytest.raises(ValueError, match=message):
        GrowConfig(**fields)


def test_growth_is_enabled_by_a_starting_depth_or_width():
    assert not GrowConfig().enabled
    assert GrowConfig(start_layers=4, epochs=[2, 4]).enabled
    assert GrowConfig(start_width=0.5, width_epochs=[3]).enabled


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"method": "lora", "freeze_frontend": True}, r"method lora already freezes every base weight"),
        ({"merge_lora": True}, r"finetune.merge_lora \(--merge-lora\) needs finetune.method lora"),
        ({"freeze_epochs": 2}, r"finetune.freeze_epochs needs something to freeze"),
        ({"method": "lora", "lora_dropout": 1.0}, r"finetune.lora_dropout must be in \[0, 1\)"),
        ({"freeze_layers": -1}, r"freeze_layers must be >= 0"),
    ],
)
def test_finetuning_refuses_contradicting_freezing_options(fields, message):
    with pytest.raises(ValueError, match=message):
        FinetuneConfig(**fields)


def test_a_full_finetune_freezes_only_when_asked():
    assert not FinetuneConfig().freezes
    assert FinetuneConfig(freeze_layers=2, freeze_epochs=1).freezes
