"""training.trainer: what a Trainer does to the model it builds before the first step (``model.init``); it
calls its hooks at their points of the run, an epoch reports what it did (its batches, the optimizer steps of
its accumulation windows, the loss, the rate), and a growth's fresh model is the same for the same epoch
without touching the run's random numbers."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from .conftest import RecordingHook, events, tiny_config
from .conftest import run_in_process as run

pytestmark = pytest.mark.usefixtures("single_process")


def test_model_init_initialises_a_new_run_once_and_a_resumed_run_not_again(corpus, tokenizer_path, tmp_path):
    config = tiny_config(corpus, tokenizer_path, tmp_path)
    config["optim"]["epochs"] = 1
    config["model"]["init"] = {"linear": "xavier_uniform", "norm": "ones"}
    run(config)
    resumed = {
        **config,
        "optim": {**config["optim"], "epochs": 2},
        "run": {**config["run"], "resume_from": str(tmp_path)},
    }

    run(resumed)

    [init] = events(tmp_path, "init")  # written by the first run only: the resumed one loaded trained weights
    assert (init["step"], init["values"]["schemes"]) == (0, {"linear": "xavier_uniform", "norm": "ones"})
    assert init["values"]["modules"]["linear"] > 0 and init["values"]["modules"]["norm"] > 0
    assert [e["epoch"] for e in events(tmp_path, "epoch")] == [0, 1], "the second epoch ran on resume"


def test_the_trainer_calls_its_hooks_in_the_order_of_the_run(make_trainer):
    calls: list[tuple[Any, ...]] = []
    trainer = make_trainer(hooks=[RecordingHook(calls)])
    # built: the starting weights, then the model wired up (before the optimizer's first step)
    assert calls == [("weights_loaded",), ("model",)]

    calls.clear()
    trainer.train_epoch(0)
    trainer.validate(0, "epoch")
    trainer.end_epoch(0)
    trainer.close()
    # the epoch starts before training mode is set; validation puts training mode back; the epoch's end
    # sees the closing validation's scores; close is the hooks' last call
    assert calls == [("epoch_start", 0), ("train_mode",), ("train_mode",), ("epoch_end", 0, True), ("close",)]


def test_an_epoch_takes_one_optimizer_step_per_accumulation_window_and_reports_it(make_trainer):
    trainer = make_trainer(gradient_accumulation_steps=3)
    batches = len(trainer.sampler.epoch_batches())

    report = trainer.train_epoch(0)

    # the last window of the epoch may be short: ceil(batches / 3) steps
    assert report["batches"] == batches
    assert report["steps"] == trainer.step == math.ceil(batches / 3)
    assert report["train_loss"] > 0 and report["skipped_examples"] == 0
    assert report["lr"] == pytest.approx(trainer.optimization.logged_rate(trainer.step, 0))
    assert report["audio_hours"] > 0
    assert set(trainer.counters) <= set(report), "the run's counters are in the epoch event"


def test_a_fresh_model_for_a_growth_is_the_same_per_epoch_and_leaves_the_runs_rng_alone(make_trainer):
    trainer = make_trainer()
    torch.manual_seed(11)
    expected_draw = torch.rand(3)
    torch.manual_seed(11)

    first, _ = trainer.fresh_model(epoch=2, width=1.0)
    again, _ = trainer.fresh_model(epoch=2, width=1.0)
    other, _ = trainer.fresh_model(epoch=3, width=1.0)

    assert torch.equal(torch.rand(3), expected_draw), "building it drew nothing from the run's generator"
    first_weights, again_weights = first.state_dict(), again.state_dict()
    assert all(torch.equal(first_weights[name], again_weights[name]) for name in first_weights)
    other_weights = other.state_dict()
    assert any(not torch.equal(first_weights[name], other_weights[name]) for name in first_weights)
