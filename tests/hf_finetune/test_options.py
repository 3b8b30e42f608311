"""hf_finetune options: read with the one options engine, typos and impossible values refused by name."""

from __future__ import annotations

import pytest

from asr_pipeline.hf_finetune.options import hf_finetune_options
from asr_pipeline.options import ConfigError


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
