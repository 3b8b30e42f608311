import dataclasses
import json

import pytest

from asr_pipeline.models.registry import (
    architecture_names,
    build_from_config,
    build_model,
    config_from_dict,
    list_variants,
    model_config,
    variant_peak_lr,
)
from asr_pipeline.models.squeezeformer import Squeezeformer, SqueezeformerConfig


def test_the_reference_architectures_hubert_and_the_pronunciation_aligner_are_named():
    assert architecture_names() == (
        "squeezeformer",
        "zipformer",
        "paraformer",
        "w2v-bert",
        "hubert",
        "hubert-pretrain",
        "speech-aligner",
    )


def test_an_unknown_architecture_names_the_registered_ones():
    message = (
        "unknown architecture 'conformer'; choose one of: squeezeformer, zipformer, paraformer, w2v-bert, "
        "hubert, hubert-pretrain, speech-aligner"
    )
    with pytest.raises(ValueError, match=message):
        build_model("conformer", input_dim=80, vocab_size=10)
    with pytest.raises(ValueError, match=message):
        list_variants("conformer")


@pytest.mark.parametrize(
    ("architecture", "variants", "input_dim"),
    [
        ("zipformer", ["s", "m", "l", "tiny", "demo"], 80),
        ("paraformer", ["base", "tiny", "demo"], 80),
        ("w2v-bert", ["600m", "tiny", "demo"], 160),
        ("hubert", ["base", "demo", "tiny"], 320),
        ("hubert-pretrain", ["base", "demo", "tiny"], 320),
    ],
)
def test_the_other_architectures_are_registered_with_their_sizes(architecture, variants, input_dim):
    assert list_variants(architecture) == variants
    model = build_model(architecture, "tiny", input_dim=input_dim, vocab_size=10)
    assert model.config.vocab_size == 10


def test_an_unknown_variant_says_what_no_variant_means():
    with pytest.raises(ValueError, match=r"choose one of: s, m, l, tiny, demo \(or none for the M sizes\)"):
        model_config("zipformer", "xl", input_dim=80, vocab_size=10)


def test_base_values_are_kept_as_given_while_none_overrides_mean_not_given():
    config = model_config(
        "squeezeformer", "tiny", input_dim=80, vocab_size=10, base={"time_recover_idx": None}, dropout=None
    )

    assert config.time_recover_idx is None  # from base, None kept
    assert config.dropout == 0.1  # None override: not given


def test_unknown_architecture_lists_the_valid_ones():
    with pytest.raises(ValueError, match="squeezeformer, zipformer, paraformer, w2v-bert"):
        model_config("conformer", input_dim=80, vocab_size=10)


def test_unknown_variant_lists_the_valid_ones():
    with pytest.raises(ValueError, match="xs, s, sm, m, ml, l, tiny, demo"):
        model_config("squeezeformer", "xxl", input_dim=80, vocab_size=10)


def test_squeezeformer_variants_are_the_paper_sizes_then_the_cpu_sizes():
    assert list_variants("squeezeformer") == ["xs", "s", "sm", "m", "ml", "l", "tiny", "demo"]


@pytest.mark.parametrize(
    ("variant", "peak"),
    [("xs", 2e-3), ("s", 2e-3), ("sm", 2e-3), ("m", 1.5e-3), ("ml", 1e-3), ("l", 1e-3), ("XS", 2e-3)],
)
def test_peak_learning_rates_follow_the_paper(variant, peak):
    assert variant_peak_lr("squeezeformer", variant) == peak


def test_no_variant_means_the_reference_defaults_256_wide_16_layers_4_heads():
    config = model_config("squeezeformer", None, input_dim=80, vocab_size=256)

    assert (config.d_model, config.num_layers, config.num_heads) == (256, 16, 4)
    # Everything else is the config dataclass's default, the U-Net placed by the paper's rule for 16 blocks.
    assert config == SqueezeformerConfig(d_model=256, num_layers=16, num_heads=4)
    assert variant_peak_lr("squeezeformer", None) is None


def test_without_a_variant_a_size_flag_overrides_only_its_own_field():
    config = model_config("squeezeformer", None, input_dim=80, vocab_size=10, num_layers=8, num_heads=None)

    assert (config.d_model, config.num_layers, config.num_heads) == (256, 8, 4)
    assert (config.time_reduce_idx, config.time_recover_idx) == (3, 7), "the U-Net follows num_layers"


def test_overrides_replace_the_variant_values_and_none_means_not_given():
    config = model_config(
        "squeezeformer", "s", input_dim=40, vocab_size=33, d_model=128, num_heads=None, dropout=0.0
    )

    assert (config.input_dim, config.vocab_size, config.d_model, config.dropout) == (40, 33, 128, 0.0)
    assert config.num_heads == 4  # None left the variant's value
    assert config.num_layers == 18


def test_overriding_num_layers_moves_the_unet_with_it_unless_given():
    assert model_config("squeezeformer", "xs", input_dim=80, vocab_size=10, num_layers=8).time_reduce_idx == 3
    explicit = model_config(
        "squeezeformer",
        "xs",
        input_dim=80,
        vocab_size=10,
        num_layers=8,
        time_reduce_idx=1,
        time_recover_idx=5,
    )
    assert (explicit.time_reduce_idx, explicit.time_recover_idx) == (1, 5)


def test_unknown_override_names_the_valid_fields():
    with pytest.raises(ValueError, match=r"unknown squeezeformer config field\(s\) hidden_size.*d_model"):
        model_config("squeezeformer", "xs", input_dim=80, vocab_size=10, hidden_size=64)


def test_build_model_builds_the_resolved_config():
    model = build_model("squeezeformer", "tiny", input_dim=20, vocab_size=11, num_layers=6)

    assert isinstance(model, Squeezeformer)
    assert model.config == model_config("squeezeformer", "tiny", input_dim=20, vocab_size=11, num_layers=6)
    assert len(model.blocks) == 6


def test_a_saved_config_rebuilds_the_same_model_even_with_none_fields():
    # No U-Net recovery can only be set on the config itself: as an override, None means "not given".
    tiny = model_config("squeezeformer", "tiny", input_dim=20, vocab_size=11, time_recover_idx=None)
    assert tiny.time_recover_idx == 3
    config = dataclasses.replace(tiny, time_recover_idx=None)
    saved = json.loads(json.dumps(dataclasses.asdict(config)))

    assert SqueezeformerConfig(**saved) == config_from_dict("squeezeformer", saved) == config
    rebuilt = build_from_config("squeezeformer", saved)
    assert rebuilt.config == config and rebuilt.time_recovery is None


def test_a_saved_config_with_a_foreign_field_is_rejected():
    with pytest.raises(ValueError, match="unknown field"):
        config_from_dict("squeezeformer", {"d_model": 32, "encoder_dim": 32})
