"""``train.run.kernels`` (``--kernels``): the Trainer sets the asr_kernels choice before building the model,
and the run's saved config records it."""

from __future__ import annotations

import json

import pytest
import torch

from asr_kernels import kernels_choice, set_kernels
from asr_pipeline.text.tokenizer import CTCTokenizer
from asr_pipeline.training.config import load_json, resolve_config, save_json
from asr_pipeline.training.distributed import DistributedContext
from asr_pipeline.training.events import EventLog
from asr_pipeline.training.loaders import build_data
from asr_pipeline.training.trainer import Trainer

from .conftest import tiny_config


@pytest.fixture
def restore_choice():
    yield
    set_kernels("auto")


def test_the_trainer_applies_the_configured_choice_and_the_saved_config_records_it(
    corpus, tokenizer_path, tmp_path, restore_choice, keep_torch_threads
):
    config = resolve_config(tiny_config(corpus, tokenizer_path, tmp_path / "run", kernels="reference"))
    ctx = DistributedContext(rank=0, local_rank=0, world_size=1, device=torch.device("cpu"))
    events = EventLog(tmp_path / "events.jsonl", enabled=False, append=False)
    vocab_size = CTCTokenizer.from_file(tokenizer_path).vocab_size

    Trainer(config, ctx, build_data(config, ctx), vocab_size, events)

    assert kernels_choice() == "reference"
    save_json(config, tmp_path / "training_config.json")
    assert json.loads((tmp_path / "training_config.json").read_text())["run"]["kernels"] == "reference"
    assert load_json(tmp_path / "training_config.json").run.kernels == "reference"


def test_an_unknown_choice_is_refused_before_training(corpus, tokenizer_path, tmp_path):
    with pytest.raises(ValueError, match="kernels"):
        resolve_config(tiny_config(corpus, tokenizer_path, tmp_path / "run", kernels="cuda"))
