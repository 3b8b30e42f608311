from __future__ import annotations

import subprocess
import sys

import pytest

from asr_pipeline.training import launch
from asr_pipeline.training.launch import TrainingFailedError, launch_training, torchrun_command


def test_a_single_node_run_is_a_standalone_torchrun_of_the_worker_module():
    assert torchrun_command("cfg.json", 2) == [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        "-m",
        "asr_pipeline.training.worker",
        "--config",
        "cfg.json",
    ]


def test_a_multi_node_run_uses_a_c10d_rendezvous_instead_of_standalone():
    command = torchrun_command("cfg.json", 4, nnodes=2, node_rank=1, rdzv_endpoint="host0:29400")

    assert "--standalone" not in command
    joined = " ".join(command)
    assert "--nnodes 2 --node-rank 1 --rdzv-backend c10d --rdzv-endpoint host0:29400" in joined
    assert "--nproc-per-node 4" in joined


def test_a_multi_node_run_without_an_endpoint_is_refused():
    with pytest.raises(ValueError, match="rdzv_endpoint"):
        torchrun_command("cfg.json", 2, nnodes=2)


def test_the_child_gets_omp_threads_per_rank_and_the_callers_env(monkeypatch):
    seen = {}

    def fake_run(command, env, check):
        seen.update(command=command, env=env, check=check)

    monkeypatch.setattr(launch, "_available_cores", lambda: 8)
    monkeypatch.setattr(subprocess, "run", fake_run)
    launch_training("cfg.json", 2, env={"EXTRA": "1"})

    assert seen["env"]["OMP_NUM_THREADS"] == "4"
    assert seen["env"]["EXTRA"] == "1"
    assert seen["check"] is True


def test_a_failed_torchrun_raises_naming_the_exit_code_and_config(monkeypatch):
    def failing_run(command, env, check):
        raise subprocess.CalledProcessError(3, command)

    monkeypatch.setattr(subprocess, "run", failing_run)

    with pytest.raises(TrainingFailedError, match=r"code 3 for config runs/cfg\.json") as error:
        launch_training("runs/cfg.json", 2)
    assert error.value.returncode == 3
