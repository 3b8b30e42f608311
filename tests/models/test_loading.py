"""A new architecture plugs in by one registry entry: built, resolved from a training config's model
section (with options) and rebuilt from a run dir through the same public functions as Squeezeformer."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file
from torch import nn

from asr_pipeline.models import registry
from asr_pipeline.models.loading import (
    build_model_for,
    is_finetuned_export,
    is_finetuned_run,
    load_run_model,
    resolve_model_config,
)
from asr_pipeline.models.spec import ArchitectureSpec
from asr_pipeline.options import ConfigError
from asr_pipeline.run_layout import (
    AVERAGE_FILE,
    CARD_FILE,
    CHECKPOINT_DIR,
    CHECKPOINT_POINTER,
    CONFIG_FILE,
    EMA_FILE,
    WEIGHTS_FILE,
)
from tests.factories import add_weight_averages


@dataclass(frozen=True)
class ToyConfig:
    input_dim: int = 8
    vocab_size: int = 5
    d_model: int = 16
    num_layers: int = 1
    num_heads: int = 1
    dropout: float = 0.0
    stack_widths: tuple[int, ...] = (4, 6)  # an architecture-specific tuple, as a Zipformer's per-stack sizes


class ToyModel(nn.Module):
    def __init__(self, config: ToyConfig) -> None:
        super().__init__()
        self.config = config
        self.stacks = nn.ModuleList(nn.Linear(config.input_dim, width) for width in config.stack_widths)
        self.output = nn.Linear(sum(config.stack_widths), config.vocab_size)


def toy_config(variant: str | None, values: Mapping[str, object]) -> ToyConfig:
    sizes = {"small": {"d_model": 16}, "wide": {"d_model": 32, "stack_widths": (8, 8, 8)}}
    return ToyConfig(**{**(sizes[variant] if variant else {}), **values})  # type: ignore[arg-type]


TOY = ArchitectureSpec(
    name="toy",
    config_class=ToyConfig,
    variants=("small", "wide"),
    config_for=toy_config,
    builder=ToyModel,
    peak_learning_rate=lambda variant: 1e-2,
    frontend="fbank",
    input_dim=8,
    output="ctc",
)


@dataclass(frozen=True)
class Settings:  # what a training config's model section carries (training.config.ModelConfig)
    architecture: str = "toy"
    variant: str | None = None
    d_model: int | None = None
    num_layers: int | None = None
    num_heads: int | None = None
    dropout: float | None = None
    options: dict[str, Any] = field(default_factory=dict)
    pretrained_dir: str | None = None


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(registry.SPECS, TOY.name, TOY)
    return TOY


def test_a_registered_architecture_builds_by_name_and_variant(toy):
    model = registry.build_model("toy", "wide", input_dim=8, vocab_size=5)

    assert isinstance(model, ToyModel) and model.config.stack_widths == (8, 8, 8)
    assert registry.list_variants("toy") == ["small", "wide"]
    assert registry.peak_learning_rate("toy", None) == 1e-2


def test_model_settings_with_options_resolve_through_the_spec(toy):
    settings = Settings(variant="small", num_layers=3, options={"stack_widths": (2, 3)})

    model, saved = build_model_for(settings, input_dim=8, vocab_size=7)

    assert saved == resolve_model_config(settings, input_dim=8, vocab_size=7)
    # As JSON saves it (tuples as lists), so a resumed run's config compares equal to the saved one.
    assert (saved["num_layers"], saved["vocab_size"], saved["stack_widths"]) == (3, 7, [2, 3])
    assert model.config.stack_widths == (2, 3) and model.output.in_features == 5


def test_an_option_that_is_not_a_config_field_is_refused_naming_the_valid_ones(toy):
    with pytest.raises(
        ValueError, match=r"unknown toy option\(s\) depth; model.options accepts: stack_widths"
    ):
        build_model_for(Settings(options={"depth": 2}), input_dim=8, vocab_size=5)


def test_a_common_field_given_as_an_option_says_where_it_belongs(toy):
    with pytest.raises(ValueError, match=r"d_model: set model.<field> itself"):
        registry.check_options("toy", {"d_model": 8})


def write_run(run_dir: Path, model: nn.Module, model_config: dict[str, Any], architecture: str) -> None:
    """A run dir as training leaves it, as far as rebuilding the model goes."""
    (run_dir / CHECKPOINT_DIR).mkdir(parents=True)
    save_file(model.state_dict(), run_dir / CHECKPOINT_DIR / WEIGHTS_FILE, metadata={"step": "3"})
    saved_config = json.loads(json.dumps(model_config))  # as JSON has it: tuples become lists
    pointer = {"step": 3, "epoch": 0, "model_config": saved_config, "metrics": {}}
    (run_dir / CHECKPOINT_POINTER).write_text(json.dumps(pointer))
    training_config = {"data": {"input_dim": 8}, "model": {"architecture": architecture, "blank_id": 2}}
    (run_dir / CONFIG_FILE).write_text(json.dumps(training_config))


def test_a_run_dir_of_a_registered_architecture_rebuilds_its_trained_model(toy, tmp_path):
    torch.manual_seed(0)
    model, model_config = build_model_for(Settings(variant="wide"), input_dim=8, vocab_size=5)
    write_run(tmp_path, model, model_config, "toy")

    loaded = load_run_model(tmp_path / CHECKPOINT_POINTER)  # the pointer stands for its run dir

    assert isinstance(loaded.model, ToyModel) and not loaded.model.training
    assert loaded.model.config == model.config, "the saved list comes back as the config's tuple"
    saved, rebuilt = model.state_dict(), loaded.model.state_dict()
    assert rebuilt.keys() == saved.keys() and all(torch.equal(rebuilt[k], saved[k]) for k in saved)
    assert (loaded.architecture, loaded.blank_id, loaded.output) == ("toy", 2, "ctc")


def test_a_squeezeformer_run_dir_rebuilds_through_the_same_function(tmp_path):
    settings = Settings(architecture="squeezeformer", variant="tiny")
    model, model_config = build_model_for(settings, input_dim=8, vocab_size=5)
    write_run(tmp_path, model, model_config, "squeezeformer")

    loaded = load_run_model(tmp_path)

    assert dataclasses.asdict(loaded.model.config) == model_config
    assert loaded.model_config == model_config


def test_an_unregistered_architecture_in_a_run_dir_is_refused_naming_the_known_ones(tmp_path):
    model, model_config = build_model_for(
        Settings(architecture="squeezeformer", variant="tiny"), input_dim=8, vocab_size=5
    )
    write_run(tmp_path, model, model_config, "toy")  # not registered in this test

    with pytest.raises(ValueError, match="unknown architecture 'toy'; choose one of: squeezeformer"):
        load_run_model(tmp_path)


def test_a_run_loads_the_weights_average_it_is_asked_for_in_the_models_dtype(tmp_path):
    model, model_config = build_model_for(
        Settings(architecture="squeezeformer", variant="tiny"), input_dim=8, vocab_size=5
    )
    write_run(tmp_path, model, model_config, "squeezeformer")
    averages = add_weight_averages(tmp_path, (AVERAGE_FILE, EMA_FILE))

    for weights, file in (("averaged", AVERAGE_FILE), ("ema", EMA_FILE)):
        loaded = load_run_model(tmp_path, weights=weights).model.state_dict()
        assert all(torch.equal(loaded[k], averages[file][k]) for k in loaded), weights
        assert loaded["output.weight"].dtype == torch.float32, "the float64 average is cast on loading"
    raw = load_run_model(tmp_path).model.state_dict()
    assert torch.equal(raw["output.weight"], model.state_dict()["output.weight"])


def test_an_exported_folder_holds_one_set_of_weights_so_an_average_is_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"format": "asr_pipeline-export"}))

    with pytest.raises(ConfigError, match=r"^--weights ema: .* is an exported model.*set --weights raw$"):
        load_run_model(tmp_path, weights="ema")


# An hf_finetune run's options (hf_finetune.options): a model named by folder or hub id, and a method.
FINETUNE_OPTIONS = {"model": "models/whisper-tiny", "method": "lora", "learning_rate": 1e-4}


def test_a_run_folder_is_one_whose_options_name_a_model_and_a_method(tmp_path):
    assert not is_finetuned_run(tmp_path)
    (tmp_path / CONFIG_FILE).write_text(json.dumps({"model": {"architecture": "squeezeformer"}}))
    assert not is_finetuned_run(tmp_path), "an asr_pipeline train run's config"
    (tmp_path / CONFIG_FILE).write_text(json.dumps(FINETUNE_OPTIONS))
    assert is_finetuned_run(tmp_path)


def test_an_export_folder_is_a_runs_options_beside_a_model_config_and_its_card(tmp_path):
    (tmp_path / CONFIG_FILE).write_text(json.dumps(FINETUNE_OPTIONS))
    assert not is_finetuned_export(tmp_path), "a run dir: no transformers config.json"
    (tmp_path / "config.json").write_text("{}")
    assert not is_finetuned_export(tmp_path), "no model card"
    (tmp_path / CARD_FILE).write_text("---\n---\n")
    assert is_finetuned_export(tmp_path)
