"""The training page's job: the form becomes hf-finetune flags, a job runs to its curves, Stop ends it."""

from __future__ import annotations

import os
import time

import pytest

from asr_pipeline.serve.train_page import TrainingJob, build_train_page, form_argv
from tests.hf_finetune.conftest import save_tiny_voxtral, short_sentences, write_demo_utterances


def test_the_form_becomes_hf_finetune_flags_leaving_empty_fields_to_the_defaults():
    values = {"model": "m", "train": "t.jsonl", "val": "", "method": "lora", "learning-rate": 1e-4, "epochs": 3.0,
              "batch-size": 8, "lora-rank": None, "max-steps": None, "evaluate": "d.jsonl", "eval-wer": True}  # fmt: skip
    assert form_argv(values) == ["--model", "m", "--train", "t.jsonl", "--method", "lora", "--learning-rate", "0.0001",
                                 "--epochs", "3", "--batch-size", "8", "--evaluate", "eval=d.jsonl", "--eval-wer"]  # fmt: skip


@pytest.fixture(scope="module")
def speech(tmp_path_factory):
    root = tmp_path_factory.mktemp("train_page")
    texts = short_sentences(8)
    return {"train": write_demo_utterances(root, texts[:6], "train", 1), "val": write_demo_utterances(root, texts[6:], "val", 2),
            "model": save_tiny_voxtral(root / "voxtral", texts)}  # fmt: skip


def wait_for(predicate, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(1)


@pytest.mark.slow
def test_a_job_runs_to_the_end_with_its_curves_and_log(speech, tmp_path):
    argv = form_argv({"model": speech["model"], "train": speech["train"], "val": speech["val"], "max-steps": 2,
                      "batch-size": 3, "lora-rank": 2})  # fmt: skip
    job = TrainingJob(argv, tmp_path / "job")
    wait_for(lambda: job.status() != "running", 400)
    assert job.status() == "finished", job.log_tail()
    curves = {row["curve"] for row in job.curves()}
    assert curves == {"train loss", "validation loss"}
    assert '"steps": 2' in job.log_tail()
    assert build_train_page(tmp_path) is not None  # the page builds (Gradio Blocks)


@pytest.mark.slow
def test_stop_ends_the_job_and_its_session(speech, tmp_path):
    argv = form_argv({"model": speech["model"], "train": speech["train"], "epochs": 500, "batch-size": 1})
    job = TrainingJob(argv, tmp_path / "job")
    time.sleep(3)
    job.stop()
    assert job.status() == "stopped"
    with pytest.raises(ProcessLookupError):
        os.killpg(job.process.pid, 0)  # nothing of the session is left
