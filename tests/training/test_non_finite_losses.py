"""Non-finite losses in whole in-process runs: skipped and counted, and too many abort the run with a
message that says what to do. NaN is forced through a hook on the training step's loss function."""

from __future__ import annotations

import math

import pytest

from asr_pipeline.training import trainer_step
from asr_pipeline.training.health import NonFiniteLossError

from .conftest import events, tiny_config
from .conftest import run_in_process as run

pytestmark = pytest.mark.usefixtures("single_process")


def poison_training_losses(monkeypatch, poisoned: set[int]) -> list[list[str]]:
    """Make the training forward passes numbered in ``poisoned`` (0-based) return NaN losses; returns the
    ids of the batches poisoned. Validation computes its losses elsewhere and stays finite."""
    calls, batches = iter(range(10**6)), []
    real = trainer_step.model_losses

    def losses_with_nan(model, batch, config, **options):
        step = real(model, batch, config, **options)
        if next(calls) in poisoned:
            batches.append(list(batch.ids))
            step.losses = step.losses * math.nan  # keeps the graph: the gradients become NaN too
        return step

    monkeypatch.setattr(trainer_step, "model_losses", losses_with_nan)
    return batches


def test_non_finite_losses_are_skipped_counted_and_kept_out_of_the_loss(
    corpus, tokenizer_path, tmp_path, monkeypatch
):
    poisoned = poison_training_losses(monkeypatch, {1, 4})
    config = tiny_config(corpus, tokenizer_path, tmp_path, log_every=1)
    metrics = run(config)

    summary = events(tmp_path, "summary")[0]["values"]
    assert len(poisoned) == 2
    assert (summary["non_finite_losses"], summary["skipped_steps"]) == (2, 2)
    assert math.isfinite(metrics["train_loss"])
    train = events(tmp_path, "train")
    assert all(math.isfinite(e["values"]["loss"]) for e in train), "NaN batches are left out of the loss"
    assert [e["values"]["non_finite_losses"] for e in train[:5]] == [0, 1, 1, 1, 2]
    assert not events(tmp_path, "abort")


def test_more_non_finite_losses_than_allowed_abort_the_run_with_an_actionable_message(
    corpus, tokenizer_path, tmp_path, monkeypatch
):
    poisoned = poison_training_losses(monkeypatch, set(range(10**6)))  # a diverged model: every batch
    # The step reads nothing back (training.health): the counts passing the limit at step 3 are read, and
    # the run stopped, at the next sync: no train event comes first here, so the first epoch's end (4 steps).
    config = tiny_config(corpus, tokenizer_path, tmp_path, max_non_finite_losses=2, log_every=100)

    with pytest.raises(NonFiniteLossError) as error:
        run(config)

    message = str(error.value)
    assert "4 batches had a non-finite (NaN/inf) loss in the first 4 optimizer steps" in message
    assert "run.max_non_finite_losses=2" in message and "--max-non-finite-losses" in message
    assert str(poisoned[0]) in message, "names the batches that failed"
    [abort] = events(tmp_path, "abort")
    assert abort["values"]["reason"] == message
    assert (abort["values"]["non_finite_losses"], abort["values"]["skipped_steps"], abort["step"]) == (
        4,
        4,
        4,
    )
    assert abort["values"]["batches"] == poisoned[:3], "the first three, read at one sync"
    assert not (tmp_path / "metrics.json").exists()


def test_max_non_finite_losses_none_never_aborts(corpus, tokenizer_path, tmp_path, monkeypatch):
    poison_training_losses(monkeypatch, set(range(10**6)))
    config = tiny_config(corpus, tokenizer_path, tmp_path, max_non_finite_losses=None)
    config["optim"]["epochs"] = 1

    metrics = run(config)

    summary = events(tmp_path, "summary")[0]["values"]
    assert summary["non_finite_losses"] == summary["skipped_steps"] == metrics["steps"] > 0
