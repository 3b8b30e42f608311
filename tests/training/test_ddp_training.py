"""A real 2-process torchrun job on CPU (gloo), launched the way the Kedro train node launches it."""

from __future__ import annotations

import json

import pytest

from asr_pipeline.training.checkpoint import load_model_from_run
from asr_pipeline.training.config import resolve_config, save_json
from asr_pipeline.training.launch import TrainingFailedError, launch_training
from asr_pipeline.training.worker import FAIL_RANK_ENV, parameter_digest

from .conftest import tiny_config

EVENT_TYPES = {"kernels", "data", "train", "validation", "epoch", "checkpoint", "summary"}


@pytest.fixture(scope="module")
def ddp_run(corpus, tokenizer_path, tmp_path_factory):
    """Two ranks, two epochs, 16 examples in 2 shards; run once for every test of this module."""
    run_dir = tmp_path_factory.mktemp("ddp_run")
    config_path = run_dir / "training_config.json"
    save_json(resolve_config(tiny_config(corpus, tokenizer_path, run_dir)), config_path)
    launch_training(config_path, nproc_per_node=2, env={FAIL_RANK_ENV: ""})
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    return run_dir, events


def test_the_run_dir_holds_every_contracted_file(ddp_run):
    run_dir, _ = ddp_run

    for name in [
        "training_config.json",
        "events.jsonl",
        "checkpoint_latest.json",
        "metrics.json",
        "checkpoint_latest/model.safetensors",
        "checkpoint_latest/training_state.pt",
    ]:
        assert (run_dir / name).is_file(), name
    assert not list(run_dir.glob("*.tmp")), "no half-written files left behind"


def test_every_event_follows_the_schema_and_each_kind_appears(ddp_run):
    _, events = ddp_run

    for event in events:
        assert set(event) == {"type", "step", "epoch", "time", "values"}
        assert event["type"] in EVENT_TYPES
        assert isinstance(event["step"], int) and isinstance(event["epoch"], int)
    assert {e["type"] for e in events} == EVENT_TYPES
    assert [e["epoch"] for e in events if e["type"] == "epoch"] == [0, 1]
    train = [e for e in events if e["type"] == "train"]
    last_step = next(e for e in events if e["type"] == "summary")["step"]
    assert all(e["step"] % 2 == 0 or e["step"] == last_step for e in train), "log_every=2, and the last step"
    assert train[-1]["step"] == last_step
    for key in ["loss", "lr", "grad_norm", "audio_seconds_per_sec"]:
        assert all(e["values"][key] > 0 for e in train), key


def test_both_ranks_end_with_identical_parameters(ddp_run):
    _, events = ddp_run
    summary = next(e for e in events if e["type"] == "summary")["values"]

    assert summary["world_size"] == 2
    digests = summary["parameter_digests"]
    assert len(digests) == 2 and digests[0] == digests[1]


def test_validation_scores_every_validation_utterance_once(ddp_run):
    _, events = ddp_run
    validations = [e["values"] for e in events if e["type"] == "validation"]

    assert len(validations) == 2
    assert all(v["utterances"] == 5 for v in validations), (
        "5 utterances over 2 ranks: the padded repeat is dropped"
    )
    assert all(v["val_cer"] >= 0 and v["val_wer"] >= 0 for v in validations)


def test_metrics_and_the_checkpoint_pointer_describe_the_finished_run(ddp_run):
    run_dir, events = ddp_run
    metrics = json.loads((run_dir / "metrics.json").read_text())
    pointer = json.loads((run_dir / "checkpoint_latest.json").read_text())

    assert set(metrics) == {"train_loss", "val_cer", "val_wer", "steps", "epochs", "train_audio_hours"}
    assert metrics["epochs"] == 2 and metrics["steps"] == events[-1]["step"] > 0
    assert metrics["train_audio_hours"] == pytest.approx(
        sum(e["values"]["audio_hours"] for e in events if e["type"] == "epoch") / 2
    )
    assert (pointer["step"], pointer["epoch"]) == (metrics["steps"], 1)
    assert pointer["metrics"]["val_cer"] == metrics["val_cer"]


def test_the_saved_weights_are_the_weights_the_ranks_ended_with(ddp_run):
    run_dir, events = ddp_run
    summary = next(e for e in events if e["type"] == "summary")["values"]

    model, _ = load_model_from_run(run_dir)

    assert parameter_digest(model) == summary["parameter_digests"][0]


def test_a_failing_rank_fails_the_job(corpus, tokenizer_path, tmp_path):
    config_path = tmp_path / "training_config.json"
    save_json(resolve_config(tiny_config(corpus, tokenizer_path, tmp_path / "run")), config_path)

    with pytest.raises(
        TrainingFailedError, match=r"exited with code \d+ for config .*training_config.json"
    ) as error:
        launch_training(config_path, nproc_per_node=2, env={FAIL_RANK_ENV: "1"})
    # The error itself names the rank's exception, not only "see above" (a captured console loses it).
    assert error.value.root_cause is not None
    assert "local rank 1: RuntimeError: fault injected by ASR_PIPELINE_FAIL_RANK=1 on rank 1" in str(
        error.value
    )
    assert "in maybe_inject_fault" in error.value.root_cause  # the innermost frames come with it
    assert not (tmp_path / "run" / "metrics.json").exists()
    assert not (tmp_path / "run" / "checkpoint_latest.json").exists()
