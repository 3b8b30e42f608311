"""Early stopping (training.early_stopping): the rule on its own, then real runs that stop after `patience`
epochs without an improvement beyond `min_delta`, log why, and stop at the same epoch when resumed midway."""

from __future__ import annotations

import json

import pytest
import torch

from asr_pipeline.models.loading import load_run_model
from asr_pipeline.publish.export import export_run
from asr_pipeline.training.early_stopping import EarlyStopping

from .conftest import events, tiny_config
from .conftest import run_in_process as run

pytestmark = pytest.mark.usefixtures("single_process")


def test_the_rule_counts_epochs_without_an_improvement_beyond_min_delta():
    rule = EarlyStopping(patience=2, min_delta=0.5)

    assert [rule.update(epoch, score) for epoch, score in enumerate([10.0, 9.0, 8.8, 8.0, 7.9, 7.8])] == [
        False,  # first score: the best
        False,  # 9.0: better by 1.0
        False,  # 8.8: only 0.2 better, one epoch without improvement
        False,  # 8.0: 1.0 better than 9.0, the count restarts
        False,  # 7.9: one
        True,  # 7.8: two: stop
    ]
    assert (rule.best_epoch, rule.best_score) == (3, 8.0)
    restored = EarlyStopping(patience=2, min_delta=0.5)
    restored.load_state_dict(json.loads(json.dumps(rule.state_dict())))
    assert restored == rule


def stopping_config(corpus, tokenizer_path, run_dir, epochs: int, patience: int) -> dict:
    config = tiny_config(corpus, tokenizer_path, run_dir, dvclive=False)
    # A min_delta no CER change can beat: every epoch after the first is one without improvement.
    config["optim"] |= {
        "epochs": epochs,
        "early_stopping_patience": patience,
        "early_stopping_min_delta": 1000.0,
    }
    return config


def test_a_run_stops_after_patience_epochs_without_improvement_and_says_why(corpus, tokenizer_path, tmp_path):
    final = run(stopping_config(corpus, tokenizer_path, tmp_path, epochs=6, patience=2))

    assert (final["stopped_early"], final["epochs_run"], final["best_epoch"]) == (True, 3, 0)
    [stop] = events(tmp_path, "early_stop")
    assert (
        stop["epoch"] == 2 and stop["values"]["best_epoch"] == 0 and stop["values"]["score_key"] == "val_cer"
    )
    assert "did not improve by more than 1000 for 2 epochs" in stop["values"]["reason"]
    assert [e["epoch"] for e in events(tmp_path, "epoch")] == [0, 1, 2]
    assert json.loads((tmp_path / "checkpoint_latest.json").read_text())["epoch"] == 2
    # The best checkpoint is promoted where a model is read: load, decode, transcribe, export.
    best_pointer = json.loads((tmp_path / "checkpoint_best.json").read_text())
    assert best_pointer["epoch"] == 0
    best, latest = load_run_model(tmp_path, "best").model, load_run_model(tmp_path).model
    assert any(
        not torch.equal(a, b)
        for a, b in zip(best.state_dict().values(), latest.state_dict().values(), strict=True)
    )
    config = export_run(tmp_path, tmp_path.parent / "best-model", checkpoint="best")
    assert config["checkpoint"] == {
        "which": "best",
        "weights": "raw",
        "step": best_pointer["step"],
        "epoch": 0,
    }
    assert (tmp_path.parent / "best-model" / "model.safetensors").read_bytes() == (
        tmp_path / "checkpoint_best" / "model.safetensors"
    ).read_bytes()


def test_a_resumed_run_stops_where_the_uninterrupted_one_does(corpus, tokenizer_path, tmp_path):
    first = stopping_config(corpus, tokenizer_path, tmp_path, epochs=2, patience=2)  # ends after epoch 1
    assert run(first)["stopped_early"] is False
    resumed = stopping_config(corpus, tokenizer_path, tmp_path, epochs=6, patience=2)
    resumed["run"]["resume_from"] = str(tmp_path)

    final = run(resumed)

    # Epoch 1 was already one without improvement: one more (epoch 2) stops it, as in the run above.
    assert (final["stopped_early"], final["epochs_run"]) == (True, 1)
    assert [e["epoch"] for e in events(tmp_path, "early_stop")] == [2]


def test_early_stopping_without_validation_data_is_an_error(corpus, tokenizer_path, tmp_path):
    config = stopping_config(corpus, tokenizer_path, tmp_path, epochs=3, patience=1)
    config["data"]["val_manifests"] = []

    with pytest.raises(RuntimeError, match="early_stopping_patience needs validation manifests"):
        run(config)
    with pytest.raises(FileNotFoundError, match="has no checkpoint_best"):
        load_run_model(tmp_path, "best")
