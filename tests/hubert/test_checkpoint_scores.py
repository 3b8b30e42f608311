"""hubert.checkpoint_scores: the best checkpoint is the lowest validation loss, the earliest among equals, and a
run that kept no checkpoints says how to keep them (scoring real checkpoints:
tests/pipelines/test_hubert_pipelines.py)."""

from __future__ import annotations

import pytest

from asr_pipeline.hubert.checkpoint_scores import best_row, score_checkpoints, validate_iteration


def test_the_best_row_is_the_lowest_loss_and_the_earliest_step_among_equals():
    rows = [{"step": 10, "val_loss": 2.0}, {"step": 20, "val_loss": 1.5}, {"step": 30, "val_loss": 1.5}]
    assert best_row(rows)["step"] == 20
    assert best_row(rows[:1])["step"] == 10


def test_a_run_without_kept_checkpoints_says_how_to_keep_them(tmp_path):
    (tmp_path / "run").mkdir()
    with pytest.raises(FileNotFoundError, match=r"holds no checkpoints.*keep_checkpoints: true"):
        score_checkpoints(tmp_path / "run", tmp_path)
    with pytest.raises(FileNotFoundError, match="--keep-checkpoints"):
        validate_iteration(tmp_path)
    assert not (tmp_path / "validation").exists()
