from __future__ import annotations

import json

import pytest

from asr_pipeline.training.config import (
    DataConfig,
    TrainConfig,
    load_json,
    peak_learning_rate,
    resolve_config,
    save_json,
    to_dict,
)

MINIMAL = {
    "data": {"train_manifests": ["train/shard-00000.parquet"]},
    "optim": {"epochs": 3, "lr_warmup_steps": 100},
    "run": {"output_dir": "runs/a"},
}


def test_a_minimal_dict_resolves_with_the_documented_defaults():
    config = resolve_config(MINIMAL)

    assert isinstance(config, TrainConfig)
    # input_dim resolves to the default architecture's frontend width (80 fbank bins)
    assert config.data == DataConfig(train_manifests=["train/shard-00000.parquet"], input_dim=80)
    assert config.data.adaptive_batch_budget == 20000 and config.data.batch_size is None
    assert (config.model.architecture, config.model.variant, config.model.blank_id) == (
        "squeezeformer",
        None,
        0,
    )
    assert config.optim.weight_decay == 5e-4 and config.optim.gradient_clip_norm == 5.0
    assert (config.run.backend, config.run.precision, config.run.seed) == ("cpu", "f32", 0)


def test_overrides_merge_deeply_and_accept_dotted_keys():
    config = resolve_config(MINIMAL, {"optim": {"epochs": 7}, "run.seed": 42, "model.d_model": 96})

    assert config.optim.epochs == 7
    assert config.optim.lr_warmup_steps == 100, "a sibling of an overridden key survives"
    assert config.run.seed == 42 and config.run.output_dir == "runs/a"
    assert config.model.d_model == 96


def test_unknown_keys_are_rejected_naming_every_one_of_them():
    with pytest.raises(ValueError) as error:
        resolve_config(MINIMAL, {"optim.epoch": 2, "data.batch_sze": 8, "trainer": {}})

    message = str(error.value)
    for key in ("optim.epoch", "data.batch_sze", "trainer"):
        assert key in message
    assert "batch_size" in message, "the message lists what the section accepts"


def test_missing_required_keys_are_named():
    with pytest.raises(ValueError, match=r"missing required training config keys: data\.train_manifests"):
        resolve_config({**MINIMAL, "data": {}})
    with pytest.raises(ValueError, match=r"missing required training config keys: data$"):
        resolve_config({key: value for key, value in MINIMAL.items() if key != "data"})


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"optim.epochs": "3"}, r"optim\.epochs: expected int, got '3'"),
        ({"optim.epochs": True}, r"optim\.epochs"),
        ({"run.backend": "tpu"}, r"run\.backend: expected one of \['cpu', 'cuda'\]"),
        ({"data.train_manifests": "one.parquet"}, r"data\.train_manifests: expected a list"),
        ({"data.val_manifests": [1]}, r"data\.val_manifests\[0\]"),
        ({"data.batch_size": 0}, r"batch_size must be > 0"),
        ({"optim.gradient_accumulation_steps": 0}, r"gradient_accumulation_steps must be > 0"),
    ],
)
def test_values_of_the_wrong_type_or_range_are_rejected_with_their_key(override, message):
    with pytest.raises(ValueError, match=message):
        resolve_config(MINIMAL, override)


def test_ints_are_accepted_for_float_fields_and_none_for_optional_ones():
    config = resolve_config(MINIMAL, {"optim.learning_rate": 1, "optim.gradient_clip_norm": None})

    assert config.optim.learning_rate == 1.0 and isinstance(config.optim.learning_rate, float)
    assert config.optim.gradient_clip_norm is None


def test_the_resolved_config_round_trips_through_json(tmp_path):
    config = resolve_config(MINIMAL, {"data.val_manifests": ["val.parquet"], "model.variant": None})
    save_json(config, tmp_path / "training_config.json")

    assert load_json(tmp_path / "training_config.json") == config
    assert to_dict(config)["data"]["val_manifests"] == ["val.parquet"]


def test_the_config_is_frozen():
    config = resolve_config(MINIMAL)
    with pytest.raises(AttributeError):
        config.optim.epochs = 5  # type: ignore[misc]


def test_the_default_peak_is_the_squeezeformer_variant_peak_capped_at_3e4():
    assert peak_learning_rate(resolve_config(MINIMAL, {"model.variant": "tiny"})) == 3e-4  # variant peak 2e-3
    assert peak_learning_rate(resolve_config(MINIMAL, {"optim.learning_rate": 1e-3})) == 1e-3


def test_clipping_by_value_and_by_norm_at_once_is_refused_naming_the_fix():
    with pytest.raises(
        ValueError, match=r"gradient_clip_value=0\.5 and gradient_clip_norm=5\.0.*set gradient_clip_norm"
    ):
        resolve_config(MINIMAL, {"optim.gradient_clip_value": 0.5})

    config = resolve_config(MINIMAL, {"optim.gradient_clip_value": 0.5, "optim.gradient_clip_norm": None})
    assert config.optim.gradient_clip_value == 0.5


def test_the_engine_fields_default_to_off():
    config = resolve_config(MINIMAL)

    assert (config.optim.ema_decay, config.optim.ema_start_step, config.optim.gradient_clip_value) == (
        None,
        0,
        None,
    )
    assert (config.run.init_from, config.run.dry_run) == (None, False)


def test_the_running_average_is_off_by_default_and_refuses_a_growing_model_or_an_empty_period():
    config = resolve_config(MINIMAL)
    assert (config.optim.use_averaged_model, config.optim.average_period) == (False, 200)

    with pytest.raises(ValueError, match=r"use_averaged_model averages the weights of one model.*drop one"):
        resolve_config(
            MINIMAL,
            {
                "optim.use_averaged_model": True,
                "grow.start_width": 0.5,
                "grow.width_epochs": [2],
                "optim.epochs": 2,
            },
        )
    with pytest.raises(ValueError, match="average_period"):
        resolve_config(MINIMAL, {"optim.use_averaged_model": True, "optim.average_period": 0})


@pytest.mark.parametrize("decay", [0.0, 1.0, 1.5])
def test_an_ema_decay_outside_0_1_is_refused(decay):
    with pytest.raises(ValueError, match=r"ema_decay must be in \(0, 1\)"):
        resolve_config(MINIMAL, {"optim.ema_decay": decay})


def test_a_config_saved_before_validation_decoding_existed_loads_with_its_decoder(tmp_path):
    saved = {
        "data": {"train_manifests": ["a"]},
        "optim": {"epochs": 1, "lr_warmup_steps": 0},
        "run": {"output_dir": "r"},
        "validation": {"beam_width": 4, "n_best": 2, "lm_word_bonus": 1.5, "lm_no_eos": True},
    }
    path = tmp_path / "training_config.json"
    path.write_text(json.dumps(saved))
    decoding = load_json(path).validation.decoding
    assert (decoding.decoder, decoding.beam_width, decoding.n_best) == ("prefix_beam", 4, 2)
    assert decoding.word_score == 1.5 and decoding.lm_no_eos is True


def test_chunking_a_model_trained_by_another_objective_is_refused():
    override = {
        "data.alignment": "units.parquet",
        "data.chunk_frames": 400,
        "model.architecture": "hubert-pretrain",
    }
    with pytest.raises(
        ValueError,
        match=r"data\.chunk_frames trains frame-wise cross-entropy on chunks .* hubert-pretrain is trained by hubert",
    ):
        resolve_config(MINIMAL, override)


def test_flex_relative_key_attention_is_refused_under_a_compile_backend_other_than_inductor():
    flex = {"model.architecture": "w2v-bert", "model.options": {"relative_key_attention": "flex"}}
    with pytest.raises(ValueError, match=r"compile_backend=aot_eager runs torch's reference"):
        resolve_config(MINIMAL, {**flex, "run.compile": "default", "run.compile_backend": "aot_eager"})
    resolve_config(MINIMAL, {**flex, "run.compile": "default"})  # inductor
    resolve_config(MINIMAL, {**flex, "run.compile_backend": "aot_eager"})  # not compiled: eager, dense
