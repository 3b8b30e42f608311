"""``run.deterministic``: two 2-rank DDP runs on the CPU end with bitwise-identical weights, and every rank
trains with the deterministic settings in force (recorded in a "deterministic" event)."""

from __future__ import annotations

import pytest
from safetensors.torch import load_file

from asr_pipeline.training.config import resolve_config
from asr_pipeline.training.determinism import CUBLAS_WORKSPACE_ENV, environment
from asr_pipeline.training.launch import run_training

from .conftest import events, tiny_config


@pytest.mark.slow  # two 2-rank torchrun jobs
@pytest.mark.usefixtures("keep_torch_threads")
def test_two_deterministic_ddp_runs_end_with_bitwise_identical_weights(corpus, tokenizer_path, tmp_path):
    weights = []
    for name in ("first", "second"):
        config = tiny_config(corpus, tokenizer_path, tmp_path / name, deterministic=True, dvclive=False)
        config["data"] |= {"num_workers": 1}  # loader workers' SpecAugment draws too
        run_training(resolve_config(config), nproc_per_node=2)
        weights.append(load_file(tmp_path / name / "checkpoint_latest" / "model.safetensors"))
        recorded = events(tmp_path / name, "deterministic")[0]["values"]
        assert recorded["deterministic_algorithms"] is True
        assert recorded["cudnn_deterministic"] is True and recorded["cudnn_benchmark"] is False
        assert recorded[CUBLAS_WORKSPACE_ENV] == ":4096:8"

    # Tensor by tensor, bit for bit (the file's bytes differ: safetensors writes its metadata in hash order).
    assert weights[0].keys() == weights[1].keys()
    assert all(
        weights[0][name].numpy().tobytes() == weights[1][name].numpy().tobytes() for name in weights[0]
    )
    digests = [
        events(tmp_path / name, "summary")[0]["values"]["parameter_digests"] for name in ("first", "second")
    ]
    assert digests[0] == digests[1] and len(set(digests[0])) == 1


def test_only_a_deterministic_run_asks_the_workers_for_the_cublas_workspace(monkeypatch):
    monkeypatch.delenv(CUBLAS_WORKSPACE_ENV, raising=False)
    assert environment(True) == {CUBLAS_WORKSPACE_ENV: ":4096:8"}
    assert environment(False) == {}
    monkeypatch.setenv(CUBLAS_WORKSPACE_ENV, ":16:8")  # the user's own choice is kept
    assert environment(True) == {CUBLAS_WORKSPACE_ENV: ":16:8"}


def test_a_run_without_it_records_no_deterministic_settings(corpus, tokenizer_path, tmp_path):
    config = tiny_config(corpus, tokenizer_path, tmp_path / "run", dvclive=False)
    config["optim"]["epochs"] = 1
    run_training(resolve_config(config), nproc_per_node=1)
    assert events(tmp_path / "run", "deterministic") == []
