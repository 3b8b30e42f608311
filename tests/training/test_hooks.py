"""``training.hooks``: a run gets the hooks its config sections ask for, in the order the Trainer calls them,
and a hook's state keeps the checkpoint key that runs saved before hooks existed."""

from __future__ import annotations

import pytest

from asr_pipeline.training.config import resolve_config
from asr_pipeline.training.hooks import FinetuneHook, GrowthHook, NewbobHook, TrainingHook, build_hooks

from .conftest import tiny_config


def hook_types(config: dict) -> list[type]:
    return [type(hook) for hook in build_hooks(resolve_config(config))]


@pytest.mark.parametrize(
    ("sections", "expected"),
    [
        ({}, [FinetuneHook]),
        ({"grow": {"start_layers": 2, "epochs": [2]}}, [GrowthHook, FinetuneHook]),
        ({"grow": {"start_width": 0.5, "width_epochs": [2]}}, [GrowthHook, FinetuneHook]),
        ({"optim": {"lr_control": "newbob"}}, [FinetuneHook, NewbobHook]),
    ],
    ids=["plain", "deepening", "widening", "newbob"],
)
def test_each_config_section_adds_its_hook_growth_first(corpus, tokenizer_path, tmp_path, sections, expected):
    config = tiny_config(corpus, tokenizer_path, tmp_path / "run")
    for section, values in sections.items():
        config[section] = {**config.get(section, {}), **values}
    assert hook_types(config) == expected


def test_growth_keeps_the_checkpoint_key_of_runs_saved_before_hooks():
    assert GrowthHook.state_key == "growth"
    assert TrainingHook.state_key is FinetuneHook.state_key is NewbobHook.state_key is None
