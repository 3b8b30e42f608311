"""The worker run in this process (WORLD_SIZE unset: a single rank, no process group)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from asr_pipeline.training.checkpoint import load_model_from_run, load_training_state
from asr_pipeline.training.dvclive_logger import DVCLIVE_DIR
from asr_pipeline.training.worker import (
    FAIL_RANK_ENV,
    FAIL_STEP_ENV,
    parameter_digest,
)

from .conftest import run_in_process as run
from .conftest import tiny_config

pytestmark = pytest.mark.usefixtures("single_process")


def summary(run_dir) -> dict:
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    return next(e for e in events if e["type"] == "summary")["values"]


def test_an_interrupted_run_resumed_mid_epoch_ends_with_the_same_weights(
    corpus, tokenizer_path, tmp_path, monkeypatch
):
    # A fixed decay length: the schedule must not depend on how the run was split.
    fixed = {"optim": {"epochs": 2, "learning_rate": 1e-3, "lr_warmup_steps": 2, "lr_decay_steps": 8}}
    straight = tmp_path / "straight"
    run(tiny_config(corpus, tokenizer_path, straight) | fixed)

    interrupted = tmp_path / "interrupted"
    config = tiny_config(corpus, tokenizer_path, interrupted, checkpoint_every_steps=1) | fixed
    monkeypatch.setenv(FAIL_RANK_ENV, "0")
    monkeypatch.setenv(FAIL_STEP_ENV, "2")
    with pytest.raises(RuntimeError, match="fault injected"):
        run(config)
    state = load_training_state(interrupted)
    assert (state["step"], state["sampler"]["epoch"], state["sampler"]["batches_done"]) == (2, 0, 2), (
        "stopped mid-epoch 0 after two batches"
    )

    monkeypatch.delenv(FAIL_RANK_ENV)
    config["run"]["resume_from"] = str(interrupted)
    metrics = run(config)

    assert metrics["steps"] == summary(straight)["steps"]
    assert summary(interrupted)["parameter_digests"] == summary(straight)["parameter_digests"]
    assert metrics["train_loss"] == pytest.approx(
        json.loads((straight / "metrics.json").read_text())["train_loss"]
    )


def test_the_saved_model_is_the_trained_model(corpus, tokenizer_path, tmp_path):
    run(tiny_config(corpus, tokenizer_path, tmp_path))

    model, config = load_model_from_run(tmp_path)

    assert [parameter_digest(model)] == summary(tmp_path)["parameter_digests"]
    assert config.run.output_dir == str(tmp_path)


def test_max_audio_duration_drops_long_examples_and_reports_them(corpus, tokenizer_path, tmp_path):
    config = tiny_config(corpus, tokenizer_path, tmp_path)
    config["data"] |= {"max_audio_duration_sec": 0.9}  # examples are 0.6..1.2 s
    config["optim"]["epochs"] = 1

    metrics = run(config)

    selection = summary(tmp_path)["train_selection"]
    assert selection["available"] == 16 and 0 < selection["too_long"] < 16
    assert selection["kept"] == 16 - selection["too_long"]
    assert metrics["train_audio_hours"] <= 16 * 0.9 / 3600


def test_the_duration_limit_filters_validation_only_when_asked(corpus, tokenizer_path, tmp_path):
    config = tiny_config(corpus, tokenizer_path, tmp_path)
    config["data"] |= {"max_audio_duration_sec": 0.9, "max_audio_duration_filters_validation": True}
    config["optim"]["epochs"] = 1

    run(config)

    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    val = next(e for e in events if e["type"] == "data")["values"]["val"]
    assert val["too_long"] > 0 and val["examples"] + val["too_long"] == len_of(corpus["val"])


def len_of(shards: list[str]) -> int:
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(shard).num_rows for shard in shards)


def test_shards_of_another_feature_dimension_are_refused_before_training(corpus, tokenizer_path, tmp_path):
    config = tiny_config(corpus, tokenizer_path, tmp_path)
    config["data"]["input_dim"] = 80

    with pytest.raises(ValueError, match=r"data.input_dim=80.*train-00000.parquet has 16"):
        run(config)


def test_a_vocab_size_that_contradicts_the_tokenizer_is_refused(corpus, tokenizer_path, tmp_path):
    config = tiny_config(corpus, tokenizer_path, tmp_path)
    config["model"]["vocab_size"] = 99

    with pytest.raises(ValueError, match=r"model\.vocab_size=99"):
        run(config)


def test_the_worker_never_imports_kedro():
    probe = "import sys, asr_pipeline.training.worker; print('kedro' in sys.modules)"

    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)

    assert result.stdout.strip() == "False"


def test_without_dvclive_a_run_writes_its_events_and_metrics_and_no_curves(corpus, tokenizer_path, tmp_path):
    config = tiny_config(corpus, tokenizer_path, tmp_path, dvclive=False)
    config["optim"]["epochs"] = 1

    run(config)

    assert (tmp_path / "events.jsonl").is_file() and (tmp_path / "metrics.json").is_file()
    assert not (tmp_path / DVCLIVE_DIR).exists()
    with_curves = tmp_path / "with"
    run(tiny_config(corpus, tokenizer_path, with_curves) | {"optim": {"epochs": 1, "lr_warmup_steps": 2}})
    assert (with_curves / DVCLIVE_DIR).is_dir(), "the default logs curves"
