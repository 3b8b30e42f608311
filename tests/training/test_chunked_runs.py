"""Chunked training runs (data.chunk_frames, data.chunking) on the tiny corpus, frame-wise on its linear
alignment (training.linear_alignment): the training step takes the loss on chunks while validation scores
whole utterances, and a run killed and resumed ends with the weights of the uninterrupted one."""

from __future__ import annotations

import pytest

from asr_pipeline.training import ctc
from asr_pipeline.training.linear_alignment import linear_align_shards, model_output_lengths
from asr_pipeline.training.worker import FAIL_RANK_ENV, FAIL_STEP_ENV

from .conftest import events, tiny_config
from .conftest import run_in_process as run

pytestmark = pytest.mark.usefixtures("single_process")

CHUNKING = {"chunk_frames": 32, "chunk_step_frames": 16}


@pytest.fixture(scope="module")
def linear_alignment(corpus, tokenizer_path, tmp_path_factory):
    """The training utterances' linear alignment over the tiny squeezeformer's output frames."""
    config = tiny_config(corpus, tokenizer_path, tmp_path_factory.mktemp("unused"))
    path = tmp_path_factory.mktemp("alignment") / "alignment.parquet"
    report = linear_align_shards(corpus["train"], path, *model_output_lengths(config))
    assert report.aligned == report.utterances == 16
    return path


def chunked_config(corpus, tokenizer_path, run_dir, alignment, **run_settings):
    config = tiny_config(corpus, tokenizer_path, run_dir, dvclive=False, **run_settings)
    config["data"] |= {"alignment": str(alignment), **CHUNKING}
    return config


def test_training_steps_take_the_loss_on_chunks_and_validation_on_whole_utterances(
    corpus, tokenizer_path, tmp_path, linear_alignment, monkeypatch
):
    chunked_rows, whole_rows = [], []
    original_chunked, original_whole = ctc.chunked_framewise_losses, ctc.framewise_losses

    def chunked(model, batch, config):
        chunked_rows.append(len(batch))
        return original_chunked(model, batch, config)

    def whole(model, batch, config):
        whole_rows.append(max(batch.ids, key=len))
        return original_whole(model, batch, config)

    monkeypatch.setattr(ctc, "chunked_framewise_losses", chunked)
    monkeypatch.setattr(ctc, "framewise_losses", whole)

    run(chunked_config(corpus, tokenizer_path, tmp_path, linear_alignment))

    epochs = [e["values"] for e in events(tmp_path, "epoch")]
    assert sum(chunked_rows) == 2 * 16, "every training utterance, each epoch, in chunks"
    assert all("@" in longest for longest in whole_rows), "frame-wise losses only on chunks ('<id>@<frame>')"
    assert len(events(tmp_path, "validation")) == 2 and all(e["train_loss"] > 0 for e in epochs)


def test_a_chunked_run_killed_and_resumed_ends_like_the_uninterrupted_one(
    corpus, tokenizer_path, tmp_path, linear_alignment, monkeypatch
):
    straight = tmp_path / "straight"
    run(chunked_config(corpus, tokenizer_path, straight, linear_alignment))
    killed = tmp_path / "killed"
    config = chunked_config(corpus, tokenizer_path, killed, linear_alignment, checkpoint_every_steps=1)
    monkeypatch.setenv(FAIL_RANK_ENV, "0")
    monkeypatch.setenv(FAIL_STEP_ENV, "5")  # in the second epoch (~4 batches each)
    with pytest.raises(RuntimeError, match="fault injected"):
        run(config)
    monkeypatch.delenv(FAIL_RANK_ENV)
    config["run"]["resume_from"] = str(killed)
    run(config)

    def summary(run_dir):
        return events(run_dir, "summary")[-1]["values"]

    assert summary(killed)["steps"] == summary(straight)["steps"]
    assert summary(killed)["parameter_digests"] == summary(straight)["parameter_digests"]
