"""``training.loop``: ``train`` writes the run dir and its event log in order; the ``Trainer`` calls its hooks at
their points of the run, saves a hook's state under its key and hands it back on resume; the vocabulary size
comes from the tokenizer or the config."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch

from asr_pipeline.run_layout import METRICS_FILE
from asr_pipeline.text.tokenizer import CTCTokenizer
from asr_pipeline.training.config import resolve_config
from asr_pipeline.training.distributed import DistributedContext
from asr_pipeline.training.events import EventLog
from asr_pipeline.training.hooks import TrainingHook
from asr_pipeline.training.loaders import build_data
from asr_pipeline.training.loop import vocab_size_of
from asr_pipeline.training.trainer import Trainer

from .conftest import events, tiny_config
from .conftest import run_in_process as run

pytestmark = pytest.mark.usefixtures("single_process")


class RecordingHook(TrainingHook):
    """Notes every point it is called at; keeps a counter as its checkpoint state."""

    state_key = "recording"

    def __init__(self, calls: list[tuple[Any, ...]]) -> None:
        self.calls = calls
        self.epochs_ended = 0

    def on_weights_loaded(self, trainer, base_report):
        self.calls.append(("weights_loaded",))

    def on_model(self, trainer):
        self.calls.append(("model",))

    def on_train_mode(self, trainer):
        self.calls.append(("train_mode",))

    def on_epoch_start(self, trainer, epoch):
        self.calls.append(("epoch_start", epoch))

    def on_epoch_end(self, trainer, epoch):
        self.epochs_ended += 1
        self.calls.append(("epoch_end", epoch, trainer.latest_scores is not None))

    def state_dict(self, trainer):
        return {"epochs_ended": self.epochs_ended}

    def load_state_dict(self, trainer, state):
        self.calls.append(("load_state", state))


def one_rank_trainer(config_dict: dict, hooks: list[TrainingHook]) -> Trainer:
    config = resolve_config(config_dict)
    ctx = DistributedContext(rank=0, local_rank=0, world_size=1, device=torch.device("cpu"))
    vocab_size = CTCTokenizer.from_file(config.run.tokenizer).vocab_size
    log = EventLog(config.run.output_dir + "/events.jsonl", enabled=False, append=False)
    return Trainer(config, ctx, build_data(config, ctx), vocab_size, log, hooks=hooks)


def test_a_one_epoch_run_writes_its_metrics_checkpoint_and_events_in_order(corpus, tokenizer_path, tmp_path):
    config = tiny_config(corpus, tokenizer_path, tmp_path / "run")
    config["optim"]["epochs"] = 1

    final = run(config)

    kinds = [event["type"] for event in events(tmp_path / "run")]
    # the data report first, steps logged during the epoch, then its validation, the epoch, the summary
    assert kinds[0] == "data" and kinds[-1] == "summary"
    assert kinds.index("train") < kinds.index("validation") < kinds.index("epoch") < kinds.index("summary")
    assert "lr_control" not in kinds and "grow" not in kinds  # no hook that was not asked for
    on_disk = json.loads((tmp_path / "run" / METRICS_FILE).read_text())
    assert on_disk == final and final["epochs"] == 1 and final["steps"] > 0
    assert final["train_loss"] > 0 and final["val_cer"] is not None
    assert (tmp_path / "run" / "checkpoint_latest").is_dir()


def test_the_trainer_calls_its_hooks_in_the_order_of_the_run(corpus, tokenizer_path, tmp_path):
    calls: list[tuple[Any, ...]] = []
    trainer = one_rank_trainer(tiny_config(corpus, tokenizer_path, tmp_path / "run"), [RecordingHook(calls)])
    # built: the starting weights, then the model wired up (before the optimizer's first step)
    assert calls == [("weights_loaded",), ("model",)]

    calls.clear()
    trainer.train_epoch(0)
    trainer.validate(0, "epoch")
    trainer.end_epoch(0)
    # the epoch starts before training mode is set; validation puts training mode back; the epoch's end
    # sees the closing validation's scores
    assert calls == [("epoch_start", 0), ("train_mode",), ("train_mode",), ("epoch_end", 0, True)]


def test_a_hooks_state_is_checkpointed_under_its_key_and_handed_back_on_resume(
    corpus, tokenizer_path, tmp_path
):
    config = tiny_config(corpus, tokenizer_path, tmp_path / "run")
    first = one_rank_trainer(config, [RecordingHook([])])
    first.train_epoch(0)
    first.end_epoch(0)
    first.checkpoint(0, {**first.sampler.state_dict(batches_done=0), "epoch": 1}, {})

    calls: list[tuple[Any, ...]] = []
    resumed = one_rank_trainer(config, [RecordingHook(calls)])
    assert resumed.resume(tmp_path / "run") == 1
    assert ("load_state", {"epochs_ended": 1}) in calls
    assert resumed.step == first.step


def test_the_vocabulary_size_is_the_tokenizers_or_the_configs_but_never_two_different_ones(
    corpus, tokenizer_path, tmp_path
):
    tokenizer = CTCTokenizer.from_file(tokenizer_path)
    config = tiny_config(corpus, tokenizer_path, tmp_path / "run")
    assert vocab_size_of(resolve_config(config), tokenizer) == tokenizer.vocab_size

    config["model"]["vocab_size"] = 7
    assert vocab_size_of(resolve_config(config), None) == 7
    with pytest.raises(
        ValueError, match=f"model.vocab_size=7 but the tokenizer .* has {tokenizer.vocab_size}"
    ):
        vocab_size_of(resolve_config(config), tokenizer)
