"""model.options: architecture-specific config fields in the training config, checked against the
architecture's config dataclass; configs saved before the key load and resume unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asr_pipeline.models import registry
from asr_pipeline.run_layout import CONFIG_FILE
from asr_pipeline.training.checkpoint import build_model_from_config, resolved_model_config, save_checkpoint
from asr_pipeline.training.config import (
    default_peak_learning_rate,
    load_json,
    resolve_config,
    save_json,
    to_dict,
)
from asr_pipeline.training.resume import check_resume_compatible, critical_keys
from tests.models.test_loading import TOY

MINIMAL = {"data": {"train_manifests": ["train/shard-00000.parquet"], "input_dim": 16}}
TINY = {**MINIMAL, "model": {"variant": "tiny"}}


def test_an_option_overrides_the_variant_value_of_its_field():
    config = resolve_config(TINY, {"model.options.conv_kernel_size": 5})

    assert config.model.options == {"conv_kernel_size": 5}
    assert resolved_model_config(config, vocab_size=11)["conv_kernel_size"] == 5
    assert resolved_model_config(resolve_config(TINY), vocab_size=11)["conv_kernel_size"] == 7


def test_an_unknown_option_is_refused_at_resolution_naming_the_valid_fields():
    with pytest.raises(
        ValueError,
        match=r"model: unknown squeezeformer option\(s\) stack_widths; model.options accepts: ff_expansion, "
        r"conv_kernel_size",
    ):
        resolve_config(TINY, {"model.options": {"stack_widths": [2, 2]}})


def test_a_common_field_in_options_is_refused_pointing_at_its_own_key():
    with pytest.raises(ValueError, match=r"d_model: set model.<field> itself, not in options"):
        resolve_config(TINY, {"model.options.d_model": 64})


def test_options_must_be_a_mapping():
    with pytest.raises(ValueError, match=r"model.options: expected a mapping, got 3"):
        resolve_config(TINY, {"model.options": 3})


def test_a_config_saved_before_options_existed_loads_and_resumes_as_no_options(tmp_path: Path):
    saved = to_dict(resolve_config(TINY))
    del saved["model"]["options"]
    path = tmp_path / CONFIG_FILE
    path.write_text(json.dumps(saved))

    assert load_json(path).model.options == {}
    assert critical_keys(saved) == critical_keys(to_dict(resolve_config(TINY)))


def test_resume_refuses_a_changed_option_naming_it(tmp_path: Path):
    config = resolve_config(TINY, {"run.output_dir": str(tmp_path)})
    save_json(config, tmp_path / CONFIG_FILE)
    model, model_config = build_model_from_config(config, vocab_size=11)
    save_checkpoint(tmp_path, model=model, training_state=None, step=1, epoch=0, model_config=model_config)
    changed = resolve_config(TINY, {"run.output_dir": str(tmp_path), "model.options.conv_kernel_size": 5})

    with pytest.raises(ValueError) as error:
        check_resume_compatible(changed, resolved_model_config(changed, vocab_size=11), tmp_path)

    changes = [line.strip() for line in str(error.value).splitlines() if line.startswith("  ")]
    assert changes == [
        "model.options.conv_kernel_size: '<absent>' -> 5",
        "resolved model config conv_kernel_size: 7 -> 5",
    ]


def test_a_registered_architecture_resolves_builds_and_takes_its_recipe_rate(monkeypatch):
    # One spec in the registry: the config checks and the builder read the same one.
    monkeypatch.setitem(registry.SPECS, TOY.name, TOY)

    config = resolve_config(MINIMAL, {"model": {"architecture": "toy", "options": {"stack_widths": [3]}}})
    model, model_config = build_model_from_config(config, vocab_size=4)

    assert model_config["stack_widths"] == [3] and model.output.in_features == 3
    assert default_peak_learning_rate("toy", None) == 1e-2
