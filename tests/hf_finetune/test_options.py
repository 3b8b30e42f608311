"""hf_finetune options: read with the one options engine, typos and impossible values refused by name; the
options train has too keep train's help and flag."""

from __future__ import annotations

import pytest

from asr_pipeline.hf_finetune.options import HFFinetuneOptions, hf_finetune_options
from asr_pipeline.options import ConfigError, walk
from asr_pipeline.training.config import TrainConfig


def test_an_entry_needs_only_its_model():
    options = hf_finetune_options({"model": "openai/whisper-small"})
    assert (options.method, options.lora_rank, options.language, options.precision) == (
        "lora",
        16,
        "en",
        "auto",
    )


def test_a_misspelt_option_names_the_known_ones():
    with pytest.raises(ConfigError, match=r"unknown option\(s\) \['lora_rnak'\].*lora_rank"):
        hf_finetune_options({"model": "m", "lora_rnak": 4})


@pytest.mark.parametrize("key, value", [("batch_size", 0), ("eval_every_steps", 0), ("learning_rate", 0.0)])
def test_impossible_values_are_refused_with_their_key(key, value):
    with pytest.raises(ConfigError, match=key):
        hf_finetune_options({"model": "m", key: value})


def test_the_lora_options_and_epochs_keep_trains_help_and_flag_with_defaults_of_their_own():
    ours = {field.key: field for field in walk(HFFinetuneOptions)}
    train = {field.key: field for field in walk(TrainConfig)}
    shared = {"lora_rank": "finetune.lora_rank", "lora_alpha": "finetune.lora_alpha",
              "lora_dropout": "finetune.lora_dropout", "lora_target_modules": "finetune.lora_target_modules",
              "epochs": "optim.epochs"}  # fmt: skip

    for key, train_key in shared.items():
        assert (ours[key].setting.help, ours[key].flag) == (
            train[train_key].setting.help,
            train[train_key].flag,
        )
    assert [ours[key].default for key in shared] == [16, 32.0, 0.05, None, 3]
