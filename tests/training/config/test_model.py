"""training.config.model: the model section refuses an unknown architecture, variant, option or init scheme
and imported weights without their folder, each naming what is accepted."""

from __future__ import annotations

import pytest

from asr_pipeline.training.config.model import ModelConfig


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"architecture": "lstm"}, r"lstm.*squeezeformer"),
        ({"variant": "huge"}, r"huge"),
        ({"architecture": "zipformer", "options": {"no_such_option": 1}}, r"no_such_option"),
        ({"init": {"lstm": "xavier_uniform"}}, r"model.init: unknown module kind 'lstm'; choose from"),
        ({"init": {"norm": "xavier_uniform"}}, r"model.init.norm: xavier_uniform needs a weight matrix"),
        (
            {"load_pretrained_weights": True},
            r"load_pretrained_weights \(--w2v-hf-load-weights\) needs pretrained_dir",
        ),
        ({"num_heads": 0}, r"num_heads must be > 0"),
        ({"dropout": -0.1}, r"dropout must be >= 0"),
    ],
)
def test_the_model_section_refuses_what_it_cannot_build_naming_what_is_accepted(fields, message):
    with pytest.raises(ValueError, match=message):
        ModelConfig(**fields)


def test_a_known_architecture_variant_and_init_are_accepted():
    config = ModelConfig(architecture="zipformer", variant="tiny", init={"linear": "normal(0.02)"})

    assert (config.architecture, config.variant, config.init) == (
        "zipformer",
        "tiny",
        {"linear": "normal(0.02)"},
    )
