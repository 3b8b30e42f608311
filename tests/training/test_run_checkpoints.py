"""training.run_checkpoints: a validation is a new best only when it beats every earlier one; an epoch's latest
checkpoint carries the best score and is written after the best one; kept weights and the checkpoint event
name every file written; a resumed run remembers its best."""

from __future__ import annotations

import json
import math

import torch
from torch import nn

from asr_pipeline.run_layout import EMA_FILE
from asr_pipeline.training.checkpoint import BEST_DIR, CHECKPOINT_DIR, STATE_FILE, load_training_state
from asr_pipeline.training.config import DataConfig, RunConfig, TrainConfig
from asr_pipeline.training.events import EVENTS_FILE, EventLog, read_events
from asr_pipeline.training.run_checkpoints import RunCheckpoints


def checkpoints(tmp_path, keep: bool = False) -> RunCheckpoints:
    config = TrainConfig(
        data=DataConfig(train_manifests=[]), run=RunConfig(output_dir=str(tmp_path), keep_checkpoints=keep)
    )
    events = EventLog(tmp_path / EVENTS_FILE, enabled=True, append=False)
    return RunCheckpoints(config, {"d_model": 4}, events)


def test_only_a_strictly_lower_cer_is_a_new_best(tmp_path):
    run = checkpoints(tmp_path)

    assert [run.offer(cer) for cer in (30.0, 25.0, 25.0, 27.0, 10.0)] == [True, True, False, False, True]
    assert run.best_val_cer == 10.0


def test_an_improving_epoch_writes_the_best_then_the_latest_with_the_best_score(tmp_path):
    run = checkpoints(tmp_path)
    model = nn.Linear(2, 2)
    run.offer(12.5)

    run.write_latest(model, step=40, epoch=1, metrics={"val_cer": 12.5}, training_state={"seed": 3},
                     averages={}, best=True)  # fmt: skip

    best = json.loads((tmp_path / f"{BEST_DIR}.json").read_text())
    latest = json.loads((tmp_path / f"{CHECKPOINT_DIR}.json").read_text())
    assert (best["step"], best["metrics"], latest["step"]) == (40, {"val_cer": 12.5}, 40)
    assert load_training_state(tmp_path)["best_val_cer"] == 12.5
    assert not (tmp_path / BEST_DIR / STATE_FILE).exists()  # nothing resumes from the best one
    (event,) = read_events(tmp_path, "checkpoint")
    assert event["values"]["path"] == str(tmp_path / CHECKPOINT_DIR)
    assert event["values"]["best_path"] == str(tmp_path / BEST_DIR) and "kept_path" not in event["values"]


def test_a_step_checkpoint_that_is_not_a_best_names_no_best_and_keeps_weights_when_asked(tmp_path):
    run = checkpoints(tmp_path, keep=True)

    run.write_latest(nn.Linear(2, 2), 7, 0, {}, {}, averages={EMA_FILE: {"weight": torch.zeros(2, 2)}})

    assert not (tmp_path / BEST_DIR).exists()
    assert (tmp_path / CHECKPOINT_DIR / EMA_FILE).is_file()
    (event,) = read_events(tmp_path, "checkpoint")
    assert "best_path" not in event["values"]
    assert event["values"]["kept_path"].endswith("step-00000007.safetensors")
    assert run.finish_uploads() is None  # nothing was uploaded


def test_a_resumed_run_remembers_its_best_and_an_old_state_without_one_has_none(tmp_path):
    run = checkpoints(tmp_path)

    run.load_state_dict({"best_val_cer": 8.0})
    assert not run.offer(9.0) and run.offer(7.0)
    run.load_state_dict({})
    assert run.best_val_cer == math.inf
