"""``asr-pipeline train`` and its run dir: a folder holding another run is refused before torchrun
(``--resume-from`` or ``--overwrite-output-dir`` say which), a run dir another training writes is refused
naming its pid, and a ``kill -9`` of the command leaves no worker running (a real torchrun job)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from asr_pipeline.cli import main
from asr_pipeline.training.lifeline import wait_exited
from tests.factories import NUM_BINS
from tests.processes import descendants, lock_held_elsewhere

DEADLINE_SEC = 30.0


def old_run(run_dir: Path) -> Path:
    """What a finished run with validation leaves, plus a file of the user's."""
    for name in ("checkpoint_latest", "checkpoint_best"):
        (run_dir / name).mkdir(parents=True)
        (run_dir / name / "model.safetensors").write_bytes(b"old weights")
    for name in ("checkpoint_latest.json", "checkpoint_best.json", "training_config.json", "metrics.json"):
        (run_dir / name).write_text('{"step": 45}')
    (run_dir / "events.jsonl").write_text('{"type": "summary"}\n')
    (run_dir / "tokenizer.model").write_bytes(b"old tokenizer")
    (run_dir / "notes.txt").write_text("mine")
    return run_dir


def train(shard: Path, tokenizer: Path, run_dir: Path, *flags: object) -> int:
    return main(
        [
            "train", "--train-manifest", str(shard), "--tokenizer", str(tokenizer), "--output-dir", str(run_dir),
            "--variant", "tiny", "--input-dim", str(NUM_BINS), *map(str, flags),
        ]
    )  # fmt: skip


@pytest.fixture
def fake_torchrun(monkeypatch) -> list[dict]:
    """Replaces torchrun: records the run dir as the workers would find it and writes a new run's files."""
    from asr_pipeline.training import launch

    started: list[dict] = []

    def fake_launch(config_path, nproc, **options):
        run_dir = Path(config_path).parent
        started.append({"files": sorted(path.name for path in run_dir.iterdir())})
        (run_dir / "checkpoint_latest.json").write_text('{"step": 1}')
        (run_dir / "metrics.json").write_text('{"steps": 1}')

    monkeypatch.setattr(launch, "launch_training", fake_launch)
    return started


def test_an_output_dir_holding_a_run_exits_2_naming_both_ways_on_and_touches_nothing(
    shard, tokenizer, tmp_path, fake_torchrun, capsys
):
    run_dir = old_run(tmp_path / "run")
    before = {path.name: path.read_bytes() for path in run_dir.iterdir() if path.is_file()}

    status = train(shard, tokenizer, run_dir)
    err = capsys.readouterr().err

    assert status == 2 and fake_torchrun == [], "refused before torchrun"
    assert err.startswith(f"asr-pipeline train: error: --output-dir {run_dir} already holds a run (")
    assert f"--resume-from {run_dir}" in err and "--overwrite-output-dir" in err and err.count("\n") == 1
    assert {path.name: path.read_bytes() for path in run_dir.iterdir() if path.is_file()} == before


def test_overwrite_output_dir_starts_over_so_no_checkpoint_of_the_old_run_remains(
    shard, tokenizer, tmp_path, fake_torchrun, capsys
):
    run_dir = old_run(tmp_path / "run")

    status = train(shard, tokenizer, run_dir, "--overwrite-output-dir")

    assert status == 0, capsys.readouterr().err
    [started] = fake_torchrun
    assert started["files"] == [".run.lock", "notes.txt", "tokenizer.model", "training_config.json"]
    assert not (run_dir / "checkpoint_best.json").exists(), (
        "--checkpoint best would load the old run's weights"
    )
    assert not (run_dir / "checkpoint_best").exists() and not (run_dir / "events.jsonl").exists()
    assert (run_dir / "tokenizer.model").read_bytes() == tokenizer.read_bytes()
    assert (run_dir / "notes.txt").read_text() == "mine", "only the run's files are deleted"


def test_a_run_dir_another_training_writes_exits_1_naming_its_pid(
    shard, tokenizer, tmp_path, fake_torchrun, capsys
):
    run_dir = old_run(tmp_path / "run")
    with lock_held_elsewhere(run_dir) as holder:
        status = train(shard, tokenizer, run_dir, "--resume-from", run_dir)
    err = capsys.readouterr().err

    assert status == 1 and fake_torchrun == []
    assert f"is in use by another training (pid {holder.pid} holds" in err and err.count("\n") == 1
    assert (run_dir / "tokenizer.model").read_bytes() == b"old tokenizer"


# --- a real torchrun job ---------------------------------------------------------------------------------------
class Job(NamedTuple):
    launcher: subprocess.Popen  # asr-pipeline train, in a process group of its own
    processes: dict[int, str]  # its torchrun and workers: pid -> command line
    run_dir: Path


@pytest.fixture
def running_job(shard, tokenizer, tmp_path) -> Iterator[Job]:
    """``asr-pipeline train`` of the tiny model for 1000 epochs, once a worker has written a checkpoint and
    logged a step (a bounded wait); everything it started is killed afterwards, whatever the test did."""
    run_dir = tmp_path / "run"
    command = [
        sys.executable, "-m", "asr_pipeline.cli", "train", "--train-manifest", str(shard), "--tokenizer",
        str(tokenizer), "--output-dir", str(run_dir), "--variant", "tiny", "--input-dim", str(NUM_BINS),
        "--epochs", "1000", "--lr-warmup-steps", "1", "--log-every", "1", "--no-dvclive",
    ]  # fmt: skip
    log = tmp_path / "train.log"  # a file, not a pipe: a full pipe would stall the job's progress output
    with log.open("w") as output:
        launcher = subprocess.Popen(command, start_new_session=True, stdout=output, stderr=subprocess.STDOUT)
    processes: dict[int, str] = {}
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and launcher.poll() is None:
            events = run_dir / "events.jsonl"
            if (run_dir / "checkpoint_latest.json").is_file() and '"type": "train"' in events.read_text():
                processes = descendants(launcher.pid)
                if any("asr_pipeline.training.worker" in command for command in processes.values()):
                    break
            time.sleep(0.2)
        else:
            pytest.fail(f"no checkpoint within the deadline; the job's output:\n{log.read_text()[-3000:]}")
        yield Job(launcher, processes, run_dir)
    finally:
        for pid in [launcher.pid, *processes]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        launcher.wait()


@pytest.mark.slow  # a real torchrun job on the tiny model (~15 s to its first checkpoint on 2 busy cores)
@pytest.mark.parametrize("target", ["process group", "launcher only"])
def test_a_killed_train_command_leaves_no_worker_running_and_no_lock(running_job, target):
    if target == "process group":  # what a terminal's kill -9 of the job does
        os.killpg(running_job.launcher.pid, signal.SIGKILL)
    else:
        os.kill(running_job.launcher.pid, signal.SIGKILL)
    running_job.launcher.wait()

    survivors = {pid: cmd for pid, cmd in running_job.processes.items() if not wait_exited(pid, DEADLINE_SEC)}
    assert survivors == {}, f"still running {DEADLINE_SEC} s after the kill"
    from asr_pipeline.training.run_dir import locked_run_dir

    with locked_run_dir(running_job.run_dir):  # the run dir is free: nothing holds its lock
        pass


@pytest.mark.slow  # a real torchrun job on the tiny model
def test_a_resume_beside_a_running_training_exits_1_naming_its_pid(running_job, shard, tokenizer, capsys):
    status = train(shard, tokenizer, running_job.run_dir, "--resume-from", running_job.run_dir)
    err = capsys.readouterr().err

    assert status == 1, err
    assert (
        f"is in use by another training (pid {running_job.launcher.pid} holds" in err and err.count("\n") == 1
    )
    assert running_job.launcher.poll() is None, "the running training goes on"
