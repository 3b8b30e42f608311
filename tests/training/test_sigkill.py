"""A real crash: the worker process is SIGKILLed mid-run (no exception handler, no cleanup, possibly
in the middle of writing a checkpoint), resumed in a new process, and must end with exactly the weights
of an uninterrupted run (CPU, one thread: bitwise reproducible)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load_file

from asr_pipeline.training.config import resolve_config, save_json

from .conftest import tiny_config

EPOCHS = 6  # ~4 steps each: long enough to land a kill mid-run


def worker(config: dict, path) -> subprocess.Popen:
    save_json(resolve_config(config), path)
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    command = [sys.executable, "-m", "asr_pipeline.training.worker", "--config", str(path)]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def config_for(corpus, tokenizer_path, run_dir) -> dict:
    config = tiny_config(corpus, tokenizer_path, run_dir, checkpoint_every_steps=1)
    config["data"]["val_manifests"] = []
    config["optim"] |= {"epochs": EPOCHS, "lr_decay_steps": 4 * EPOCHS, "ema_decay": 0.9}
    return config


@pytest.mark.slow  # three torchrun jobs, one killed
def test_a_sigkilled_worker_resumed_from_its_checkpoint_ends_with_the_uninterrupted_weights(
    corpus, tokenizer_path, tmp_path
):
    straight = worker(config_for(corpus, tokenizer_path, tmp_path / "straight"), tmp_path / "straight.json")
    killed_dir = tmp_path / "killed"
    victim = worker(config_for(corpus, tokenizer_path, killed_dir), tmp_path / "killed.json")
    pointer, deadline = killed_dir / "checkpoint_latest.json", time.monotonic() + 120
    while time.monotonic() < deadline and victim.poll() is None:
        if pointer.is_file() and json.loads(pointer.read_text())["step"] >= 5:  # mid epoch 1
            break
        time.sleep(0.002)
    assert victim.poll() is None, f"the worker ended before it could be killed: {victim.stderr.read()}"
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    killed_at = json.loads(pointer.read_text())["step"]
    assert killed_at < 4 * EPOCHS - 1, "killed before the end"

    resumed = config_for(corpus, tokenizer_path, killed_dir)
    resumed["run"]["resume_from"] = str(killed_dir)
    resumer = worker(resumed, tmp_path / "resumed.json")
    for process in (straight, resumer):
        assert process.wait(timeout=300) == 0, process.stderr.read()

    for file in ("model.safetensors", "ema.safetensors"):
        expected = load_file(tmp_path / "straight" / "checkpoint_latest" / file)
        actual = load_file(killed_dir / "checkpoint_latest" / file)
        assert expected.keys() == actual.keys()
        assert all(torch.equal(expected[name], actual[name]) for name in expected), file
