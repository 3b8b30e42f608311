"""training.trainer_state: a checkpoint keeps what a resume needs (the step, the epoch, each hook's state under
its key) and hands it back; early stopping is asked only when configured and needs a validation score."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import RecordingHook

pytestmark = pytest.mark.usefixtures("single_process")


def test_a_resume_hands_back_the_weights_step_epoch_and_each_hooks_state_under_its_key(
    make_trainer, tmp_path
):
    first = make_trainer(hooks=[RecordingHook([])])
    first.train_epoch(0)
    first.end_epoch(0)
    first.checkpoint(0, {**first.sampler.state_dict(batches_done=0), "epoch": 1}, {})
    saved = {name: tensor.clone() for name, tensor in first.model.state_dict().items()}

    calls: list[tuple[Any, ...]] = []
    resumed = make_trainer(hooks=[RecordingHook(calls)])
    assert resumed.resume(tmp_path / "run") == 1

    assert ("load_state", {"epochs_ended": 1}) in calls
    assert resumed.step == first.step and resumed.epoch == 1
    restored = resumed.model.state_dict()
    assert restored.keys() == saved.keys()
    assert all(restored[name].equal(saved[name]) for name in saved)


def test_without_early_stopping_the_run_never_stops_early(make_trainer):
    assert make_trainer().consider_stopping(0) is False


def test_early_stopping_after_an_epoch_without_a_validation_score_names_what_it_needs(make_trainer):
    trainer = make_trainer(early_stopping_patience=1)

    with pytest.raises(RuntimeError, match=r"epoch 1 ended without a validation score; .*data.val_manifests"):
        trainer.consider_stopping(0)


def test_early_stopping_decides_on_the_closing_validation_score(make_trainer):
    trainer = make_trainer(early_stopping_patience=1)
    trainer.validate(0, "epoch")

    assert trainer.consider_stopping(0) is False, "the first score is an improvement"
    trainer.latest_scores = {**trainer.latest_scores}  # the same score again: no improvement
    assert trainer.consider_stopping(1) is True
