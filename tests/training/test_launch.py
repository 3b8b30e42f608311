from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from asr_pipeline.training import launch
from asr_pipeline.training.config import TrainConfig, resolve_config
from asr_pipeline.training.launch import (
    TrainingFailedError,
    check_devices,
    cuda_device_index,
    launch_options,
    launch_training,
    resolve_nproc_per_node,
    run_training,
    torchrun_command,
)


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
    assert "--nnodes 2 --node-rank 1 --rdzv-backend c10d --rdzv-endpoint host0:29400 --rdzv-id" in joined
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


def test_torchrun_starts_under_the_parent_death_guard_and_the_ranks_learn_the_launchers_pid(monkeypatch):
    from asr_pipeline.training.lifeline import LAUNCHER_PID_ENV

    seen = {}
    monkeypatch.setattr(subprocess, "run", lambda command, env, check: seen.update(command=command, env=env))
    launch_training("cfg.json", 1)

    guard = [sys.executable, "-m", "asr_pipeline.training.lifeline", "--parent", str(os.getpid()), "--"]
    log_dir = seen["command"][seen["command"].index("--log-dir") + 1]
    assert seen["command"] == [*guard, *torchrun_command("cfg.json", 1, log_dir=log_dir)]
    assert seen["env"][LAUNCHER_PID_ENV] == str(os.getpid())


def test_a_failed_torchrun_raises_naming_the_exit_code_and_config(monkeypatch):
    def failing_run(command, env, check):
        raise subprocess.CalledProcessError(3, command)

    monkeypatch.setattr(subprocess, "run", failing_run)

    with pytest.raises(TrainingFailedError, match=r"code 3 for config runs/cfg\.json") as error:
        launch_training("runs/cfg.json", 2)
    assert error.value.returncode == 3


def test_a_multi_node_run_passes_the_rendezvous_id_and_backend():
    command = torchrun_command(
        "cfg.json", 2, nnodes=3, node_rank=2, rdzv_endpoint="h:1", rdzv_id="job-7", rdzv_backend="static"
    )

    assert command[3:15] == [
        "--nnodes", "3", "--node-rank", "2", "--rdzv-backend", "static", "--rdzv-endpoint", "h:1",
        "--rdzv-id", "job-7", "--nproc-per-node", "2",
    ]  # fmt: skip
    assert "--rdzv-id asr-pipeline" in " ".join(torchrun_command("c", 1, nnodes=2, rdzv_endpoint="h:1"))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"nnodes": 2, "node_rank": 2, "rdzv_endpoint": "h:1"}, r"node_rank must lie in \[0, 2\)"),
        ({"nnodes": 2, "rdzv_endpoint": "h:1", "rdzv_backend": "etcd"}, r"rdzv_backend must be one of"),
        ({"nnodes": 0}, r"nnodes must be >= 1"),
    ],
)
def test_rendezvous_options_that_cannot_work_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        torchrun_command("cfg.json", 1, **options)


def test_train_launch_params_become_run_training_options_and_unknown_keys_are_named():
    params = {"nproc_per_node": "2", "nnodes": 1, "node_rank": 0, "rdzv_endpoint": None, "rdzv_id": "j"}

    assert launch_options(params) == {"nproc_per_node": 2, "nnodes": 1, "node_rank": 0, "rdzv_id": "j"}
    assert launch_options({"nproc_per_node": None}) == {}, "null: one process per device index, else 1"
    with pytest.raises(ValueError, match=r"unknown train.launch key\(s\) master_port; .*rdzv_endpoint"):
        launch_options({"master_port": 29500})


def cuda_config(**run) -> TrainConfig:
    return resolve_config({"data": {"train_manifests": ["a.parquet"]}, "run": {"backend": "cuda", **run}})


def test_device_indices_set_the_process_count_and_must_match_an_explicit_one():
    config = cuda_config(device_indices=[2, 3])

    assert resolve_nproc_per_node(config, None) == 2
    assert resolve_nproc_per_node(config, 2) == 2
    with pytest.raises(ValueError, match=r"nproc_per_node=3 but device_indices=\[2, 3\] lists 2 GPU"):
        resolve_nproc_per_node(config, 3)
    assert resolve_nproc_per_node(cuda_config(), None) == 1
    assert resolve_nproc_per_node(cuda_config(), 4) == 4


def test_local_rank_i_trains_on_the_ith_listed_gpu_or_its_own_index():
    assert [cuda_device_index(cuda_config(device_indices=[3, 1]).run, rank, 2) for rank in (0, 1)] == [3, 1]
    assert cuda_device_index(cuda_config(device_index=5).run, 0, 1) == 5, "one process: --device-index"
    assert [cuda_device_index(cuda_config().run, rank, 2) for rank in (0, 1)] == [0, 1]
    with pytest.raises(ValueError, match=r"device_index=5 picks one GPU, but 2 processes.*--device-indices"):
        cuda_device_index(cuda_config(device_index=5).run, 0, 2)
    with pytest.raises(ValueError, match=r"lists 2 GPU\(s\) but 3 process\(es\) run on this node"):
        cuda_device_index(cuda_config(device_indices=[0, 1]).run, 0, 3)


def test_a_cuda_run_is_refused_before_launch_when_the_machine_lacks_the_gpus():
    with pytest.raises(
        ValueError, match=r"backend 'cuda' \(--backend cuda\) but no CUDA device.*--backend cpu"
    ):
        check_devices(cuda_config(), 1, cuda_device_count=0)
    with pytest.raises(ValueError, match=r"CUDA device\(s\) \[0, 2\] but only 2 are visible"):
        check_devices(cuda_config(device_indices=[0, 2]), 2, cuda_device_count=2)
    check_devices(cuda_config(device_indices=[0, 1]), 2, cuda_device_count=2)
    check_devices(
        resolve_config({"data": {"train_manifests": ["a"]}}), 4, cuda_device_count=0
    )  # CPU: no check


def test_run_training_checks_devices_before_writing_anything(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    config = cuda_config(output_dir=str(tmp_path / "run"))
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("torchrun must not start"))

    with pytest.raises(ValueError, match="no CUDA device is usable here"):
        run_training(config)
    assert not (tmp_path / "run").exists()


def _error_file(log_dir, attempt_rank: str, message: str, written_ns: int, callstack: str) -> None:
    """A worker's error.json as torchrun's ``@record`` writes it, last modified at ``written_ns``."""
    path = log_dir / "job_x" / attempt_rank / "error.json"
    path.parent.mkdir(parents=True)
    extra = {"py_callstack": callstack, "timestamp": str(1_700_000_000)}  # whole seconds: a tie
    path.write_text(json.dumps({"message": {"message": message, "extraInfo": extra}}))
    os.utime(path, ns=(written_ns, written_ns))


def test_the_first_rank_failure_is_the_earliest_error_file_with_its_innermost_frames(tmp_path):
    deep = "Traceback (most recent call last):\n" + "".join(
        f'  File "f{i}.py", line {i}\n' for i in range(30)
    )
    # Rank 1 fails first; rank 0 follows within the same second (their recorded timestamps tie).
    _error_file(tmp_path, "attempt_0/0", "RuntimeError: gloo lost rank 1", 2_000_500, "Traceback\n  late\n")
    _error_file(
        tmp_path, "attempt_0/1", "ValueError: shard 3 is broken", 2_000_000, deep + "ValueError: shard 3\n"
    )
    (tmp_path / "job_x" / "attempt_0" / "2").mkdir()
    (tmp_path / "job_x" / "attempt_0" / "2" / "error.json").write_text("{half-writ")  # skipped, not fatal

    summary = launch.first_rank_failure(tmp_path)

    assert summary.splitlines()[0] == "local rank 1: ValueError: shard 3 is broken"
    assert (
        summary.splitlines()[1:]
        == (deep + "ValueError: shard 3").splitlines()[-launch.ROOT_CAUSE_TRACEBACK_LINES :]
    )
    assert launch.first_rank_failure(tmp_path / "nothing") is None


def test_a_failed_torchrun_names_the_first_failing_rank_in_its_message(monkeypatch):
    def failing_run(command, env, check):
        log_dir = Path(command[command.index("--log-dir") + 1])
        _error_file(log_dir, "attempt_0/1", "KeyError: 'val_cer'", 5, 'Traceback\n  File "loop.py"\n')
        raise subprocess.CalledProcessError(1, command)

    monkeypatch.setattr(subprocess, "run", failing_run)

    with pytest.raises(
        TrainingFailedError, match=r"the first failure, local rank 1: KeyError: 'val_cer'"
    ) as error:
        launch_training("cfg.json", 2)
    assert 'File "loop.py"' in error.value.root_cause
