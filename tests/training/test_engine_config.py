"""The training engine's config: model size defaults, architectures, recipe learning rates, devices,
and reading configs saved before keys were renamed or added."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from asr_pipeline.models.registry import architecture_names, get_spec
from asr_pipeline.models.squeezeformer import SIZES
from asr_pipeline.training.checkpoint import resolved_model_config
from asr_pipeline.training.config import (
    default_peak_learning_rate,
    load_json,
    peak_learning_rate,
    resolve_config,
    to_dict,
    upgrade_saved,
)
from asr_pipeline.training.resume import critical_keys
from tests.conftest import PROJECT_ROOT

MINIMAL = {"data": {"train_manifests": ["train/shard-00000.parquet"]}}


def test_the_reference_defaults_need_only_the_training_manifests():
    config = resolve_config(MINIMAL)

    assert (config.optim.epochs, config.optim.weight_decay, config.optim.lr_min) == (500, 5e-4, 0.0)
    assert (config.optim.lr_warmup_epochs, config.optim.lr_hold_epochs, config.optim.lr_decay_exponent) == (
        20,
        160,
        1.0,
    )
    assert not config.optim.uses_step_schedule
    assert (config.run.output_dir, config.run.log_every, config.run.seed) == ("runs/asr", 10, 0)
    assert (config.run.backend, config.run.device_index, config.run.device_indices) == ("cpu", 0, [])


def test_without_a_variant_the_model_is_256_wide_16_layers_4_heads():
    resolved = resolved_model_config(resolve_config(MINIMAL), vocab_size=33)

    assert (resolved["d_model"], resolved["num_layers"], resolved["num_heads"]) == (256, 16, 4)


def test_a_variant_brings_its_own_sizes_and_size_flags_still_override_them():
    xs = resolved_model_config(resolve_config(MINIMAL, {"model.variant": "xs"}), vocab_size=33)
    wider = resolved_model_config(
        resolve_config(MINIMAL, {"model.variant": "xs", "model.d_model": 192}), vocab_size=33
    )

    assert (xs["d_model"], xs["num_layers"], xs["num_heads"]) == (144, 16, 4)
    assert (wider["d_model"], wider["num_layers"], wider["num_heads"]) == (192, 16, 4)


def test_params_yaml_train_section_still_resolves_to_the_demo_variant_on_the_step_schedule():
    # What the Kedro train node does with params:train (paths filled in from the catalog).
    train = yaml.safe_load((PROJECT_ROOT / "params.yaml").read_text())["train"]
    config = resolve_config(
        {
            "data": {**train["data"], "train_manifests": ["a.parquet"]},
            "model": train["model"],
            "optim": train["optim"],
            "run": {**train["run"], "output_dir": "runs/x"},
        }
    )

    assert config.model.variant == "demo"
    assert config.optim.uses_step_schedule, "params set lr_warmup_steps, so the demo keeps its step schedule"


def test_every_known_architecture_resolves_and_a_paraformer_option_reaches_the_model_section():
    config = resolve_config(
        MINIMAL, {"model.architecture": "paraformer", "model.options": {"alignment_mode": "viterbi"}}
    )
    assert config.model.options == {"alignment_mode": "viterbi"} and config.data.input_dim == 80


@pytest.mark.parametrize(
    ("architecture", "width"), [("squeezeformer", 80), ("zipformer", 80), ("w2v-bert", 160)]
)
def test_input_dim_defaults_to_the_architectures_frontend_width(architecture, width):
    config = resolve_config(MINIMAL, {"model.architecture": architecture})

    assert config.data.input_dim == width
    assert to_dict(config)["data"]["input_dim"] == width  # the saved config has the resolved width
    assert (
        resolve_config(MINIMAL, {"model.architecture": "w2v-bert", "data.input_dim": 80}).data.input_dim == 80
    )


def test_load_pretrained_weights_without_a_folder_is_refused():
    with pytest.raises(ValueError, match=r"needs pretrained_dir .*--w2v-hf-model-dir"):
        resolve_config(MINIMAL, {"model.architecture": "w2v-bert", "model.load_pretrained_weights": True})


def test_an_unknown_variant_is_refused_by_config_resolution_naming_the_sizes():
    with pytest.raises(
        ValueError, match=r"model: unknown squeezeformer variant 'xxl'; choose one of: xs, s, sm"
    ):
        resolve_config(MINIMAL, {"model.variant": "xxl"})


def test_an_unknown_architecture_lists_the_known_ones():
    with pytest.raises(ValueError, match="choose one of: squeezeformer, zipformer, paraformer, w2v-bert"):
        resolve_config(MINIMAL, {"model.architecture": "conformer"})


@pytest.mark.parametrize(
    ("architecture", "variant", "peak"),
    [
        ("squeezeformer", None, 3e-4),  # no published peak for the default sizes: the cap itself
        ("squeezeformer", "xs", 3e-4),  # min(2e-3, 3e-4)
        ("squeezeformer", "l", 3e-4),  # min(1e-3, 3e-4)
        ("zipformer", None, 1e-3),
        ("paraformer", None, 1e-3),
        ("paraformer", "demo", 1e-3),
        ("w2v-bert", None, 1e-4),
    ],
)
def test_the_recipe_peak_learning_rate_depends_on_the_architecture(architecture, variant, peak):
    assert default_peak_learning_rate(architecture, variant) == peak


def test_a_given_learning_rate_wins_over_the_recipe():
    assert peak_learning_rate(resolve_config(MINIMAL, {"optim.learning_rate": 5e-3})) == 5e-3
    assert peak_learning_rate(resolve_config(MINIMAL)) == 3e-4


def test_the_variant_names_in_help_match_the_squeezeformer_sizes():
    assert list(get_spec("squeezeformer").variants) == list(SIZES)
    assert architecture_names()[0] == "squeezeformer"


@pytest.mark.parametrize(
    ("run", "message"),
    [
        ({"device_indices": [0, 1]}, r"choose CUDA devices, but backend is 'cpu'.*--backend cuda"),
        ({"device_index": 1}, r"choose CUDA devices, but backend is 'cpu'"),
        ({"backend": "cuda", "device_indices": [0, 0]}, r"names a GPU twice"),
        ({"backend": "cuda", "device_indices": [-1]}, r"device_indices must be >= 0"),
        (
            {"backend": "cuda", "device_index": 2, "device_indices": [0, 1]},
            r"--device-index.*--device-indices",
        ),
    ],
)
def test_device_choices_that_cannot_work_are_refused_naming_the_fix(run, message):
    with pytest.raises(ValueError, match=message):
        resolve_config(MINIMAL, {"run": run})


def test_an_lr_min_above_an_explicit_peak_is_refused_at_resolution():
    with pytest.raises(ValueError, match=r"lr_min=0\.1 is above the peak learning_rate=0\.01"):
        resolve_config(MINIMAL, {"optim.learning_rate": 0.01, "optim.lr_min": 0.1})


def test_a_config_saved_with_lr_decay_power_loads_as_lr_decay_exponent(tmp_path: Path):
    saved = to_dict(resolve_config(MINIMAL, {"optim.lr_warmup_steps": 5}))
    del saved["optim"]["lr_decay_exponent"]
    saved["optim"]["lr_decay_power"] = 2.0
    path = tmp_path / "training_config.json"
    path.write_text(json.dumps(saved))

    assert load_json(path).optim.lr_decay_exponent == 2.0
    assert "lr_decay_power" not in upgrade_saved(saved)["optim"]
    assert saved["optim"]["lr_decay_power"] == 2.0, "the caller's dict is left alone"


def test_resuming_a_run_saved_before_the_epoch_schedule_keys_existed_sees_no_change():
    new = to_dict(resolve_config(MINIMAL, {"optim.lr_warmup_steps": 5}))
    old = to_dict(resolve_config(MINIMAL, {"optim.lr_warmup_steps": 5}))
    for key in ("lr_warmup_epochs", "lr_hold_epochs"):
        del old["optim"][key]
    old["optim"]["lr_decay_power"] = old["optim"].pop("lr_decay_exponent")

    assert critical_keys(old) == critical_keys(new)
    changed = to_dict(resolve_config(MINIMAL, {"optim.lr_warmup_steps": 5, "optim.lr_warmup_epochs": 3}))
    assert critical_keys(old) != critical_keys(changed), "a key set away from its default is a change"
