"""One writer per run dir, and a new run never mixes with an old one: the run dir's lock (held by a child
process here, then killed: no stale lock), rank 0's share of it, run_training holding it around torchrun,
and the one preparation of a run dir (refusal of a folder holding a run, starting over explicitly)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from asr_pipeline.run_layout import LOCK_FILE, METRICS_FILE, TOKENIZER_FILE
from asr_pipeline.training import launch
from asr_pipeline.training.config import resolve_config
from asr_pipeline.training.run_dir import (
    LOCK_HOLDER_ENV,
    RunDirLockedError,
    check_run_dir,
    locked_run_dir,
    prepare_run_dir,
    rank_zero_lock,
)

from .conftest import tiny_config


def hold_lock(run_dir: Path) -> subprocess.Popen:
    """A child process that holds ``run_dir``'s lock until killed; returns once it holds it."""
    code = f"""
        import time
        from asr_pipeline.training.run_dir import locked_run_dir
        with locked_run_dir({str(run_dir)!r}):
            print("locked", flush=True)
            time.sleep(120)
    """
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline() == "locked\n"
    return holder


@pytest.fixture
def holder(tmp_path):
    process = hold_lock(tmp_path / "run")
    yield process
    process.kill()
    process.wait()


def test_a_locked_run_dir_is_refused_naming_the_holders_pid_and_freed_when_the_holder_is_killed(
    tmp_path, holder
):
    run_dir = tmp_path / "run"

    with pytest.raises(RunDirLockedError) as refused, locked_run_dir(run_dir):
        pytest.fail("a second writer got the lock")
    message = str(refused.value)
    assert refused.value.pid == holder.pid
    assert f"pid {holder.pid}" in message and f"kill {holder.pid}" in message and "\n" not in message

    holder.kill()  # SIGKILL: no cleanup runs, the lock file stays behind
    holder.wait()
    assert (run_dir / LOCK_FILE).is_file()
    with locked_run_dir(run_dir):  # the kernel dropped the lock with its holder: nothing stale
        assert (run_dir / LOCK_FILE).read_text() == f"{os.getpid()}\n"
    assert not (run_dir / LOCK_FILE).exists(), "a clean release removes the lock file"


def test_rank_zero_runs_under_its_launchers_lock_but_not_under_anyone_elses(tmp_path, holder):
    run_dir = tmp_path / "run"

    with rank_zero_lock(run_dir, held_by=holder.pid):
        pass
    with pytest.raises(RunDirLockedError, match=f"pid {holder.pid}"), rank_zero_lock(run_dir, held_by=1):
        pytest.fail("rank 0 ran beside another run")
    with pytest.raises(RunDirLockedError), rank_zero_lock(run_dir, held_by=None):
        pytest.fail("rank 0 ran beside another run")


def test_a_failure_under_the_launchers_lock_is_not_chained_to_the_lock_refusal(tmp_path, holder):
    run_dir = tmp_path / "run"

    with pytest.raises(ValueError) as failed, rank_zero_lock(run_dir, held_by=holder.pid):
        raise ValueError("the training failed")
    assert failed.value.__context__ is None, "the traceback would read 'during handling of RunDirLockedError'"


def test_rank_zero_of_a_run_started_by_hand_holds_the_lock_itself(tmp_path):
    run_dir = tmp_path / "run"

    with (
        rank_zero_lock(run_dir, held_by=None),
        pytest.raises(RunDirLockedError, match=f"pid {os.getpid()}"),
        locked_run_dir(run_dir),
    ):
        pytest.fail("rank 0 did not hold the lock")
    with locked_run_dir(run_dir):
        pass


# --- run_training -------------------------------------------------------------------------------------------
def test_run_training_holds_the_lock_around_torchrun_and_tells_the_ranks(
    corpus, tokenizer_path, tmp_path, monkeypatch
):
    run_dir = tmp_path / "run"
    seen = {}

    def fake_launch(config_path, nproc, *, env, **rendezvous):
        seen["env"] = env
        with pytest.raises(RunDirLockedError, match=f"pid {os.getpid()}"), locked_run_dir(run_dir):
            pass
        (run_dir / METRICS_FILE).write_text("{}")

    monkeypatch.setattr(launch, "launch_training", fake_launch)
    launch.run_training(
        resolve_config(tiny_config(corpus, tokenizer_path, run_dir)), run_files={"x.bin": b"x"}
    )

    assert seen["env"][LOCK_HOLDER_ENV] == str(os.getpid())
    assert (run_dir / "x.bin").read_bytes() == b"x"
    assert not (run_dir / LOCK_FILE).exists()


def test_run_training_on_a_locked_run_dir_is_refused_before_it_writes(
    corpus, tokenizer_path, tmp_path, holder, monkeypatch
):
    run_dir = tmp_path / "run"
    monkeypatch.setattr(launch, "launch_training", lambda *a, **k: pytest.fail("torchrun must not start"))
    config = resolve_config(tiny_config(corpus, tokenizer_path, run_dir))

    with pytest.raises(RunDirLockedError, match=f"pid {holder.pid}"):
        launch.run_training(config, run_files={TOKENIZER_FILE: b"new"}, overwrite=True)
    assert sorted(path.name for path in run_dir.iterdir()) == [LOCK_FILE]


# --- preparing a run dir ------------------------------------------------------------------------------------
def old_run(run_dir: Path) -> Path:
    """A finished run's files, plus a user's own file and the CLI's manifest split."""
    (run_dir / "checkpoint_latest").mkdir(parents=True)
    (run_dir / "checkpoint_latest" / "model.safetensors").write_bytes(b"old")
    (run_dir / "checkpoint_best").mkdir()
    for name in ("checkpoint_latest.json", "checkpoint_best.json", "training_config.json", "metrics.json"):
        (run_dir / name).write_text("{}")
    (run_dir / "events.jsonl").write_text('{"type": "summary"}\n')
    (run_dir / "tokenizer.model").write_bytes(b"old tokenizer")
    (run_dir / "notes.txt").write_text("mine")
    (run_dir / "manifest_split").mkdir()
    return run_dir


def config_in(run_dir: Path, **run):
    return resolve_config(
        {"data": {"train_manifests": ["a.parquet"]}, "run": {"output_dir": str(run_dir), **run}}
    )


@pytest.mark.parametrize("marker", ["checkpoint_latest.json", "events.jsonl", "training_config.json"])
def test_a_folder_holding_a_run_is_refused_naming_both_ways_on(tmp_path, marker):
    (tmp_path / marker).write_text("{}")

    with pytest.raises(FileExistsError) as refused:
        prepare_run_dir(config_in(tmp_path), files={TOKENIZER_FILE: b"new"})
    message = str(refused.value)
    assert f"--output-dir {tmp_path} already holds a run ({marker})" in message
    assert (
        f"--resume-from {tmp_path}" in message and "--overwrite-output-dir" in message and "\n" not in message
    )
    assert not (tmp_path / TOKENIZER_FILE).exists(), "nothing written"


def test_overwrite_deletes_the_previous_runs_files_and_nothing_else(tmp_path):
    run_dir = old_run(tmp_path / "run")

    prepare_run_dir(config_in(run_dir), overwrite=True, files={TOKENIZER_FILE: b"new"})

    assert sorted(path.name for path in run_dir.iterdir()) == ["manifest_split", "notes.txt", TOKENIZER_FILE]
    assert (run_dir / TOKENIZER_FILE).read_bytes() == b"new"


def test_a_run_resumed_in_place_keeps_its_files(tmp_path):
    run_dir = old_run(tmp_path / "run")

    prepare_run_dir(config_in(run_dir, resume_from=str(run_dir / "checkpoint_latest")))

    assert (run_dir / "checkpoint_best.json").is_file() and (run_dir / "events.jsonl").is_file()


def test_resuming_from_another_run_into_a_folder_holding_a_run_is_refused(tmp_path):
    old_run(tmp_path / "run")

    with pytest.raises(FileExistsError, match="already holds a run"):
        check_run_dir(config_in(tmp_path / "run", resume_from=str(tmp_path / "elsewhere")))


def test_overwriting_the_run_one_resumes_from_is_refused(tmp_path):
    run_dir = old_run(tmp_path / "run")

    with pytest.raises(
        ValueError, match=r"--overwrite-output-dir would delete .* --resume-from continues from"
    ):
        prepare_run_dir(config_in(run_dir, resume_from=str(run_dir)), overwrite=True)
    assert json.loads((run_dir / "checkpoint_latest.json").read_text()) == {}


def test_an_empty_or_missing_folder_is_prepared(tmp_path):
    assert prepare_run_dir(config_in(tmp_path / "new")).is_dir()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("x")
    prepare_run_dir(config_in(tmp_path / "mine"))  # a folder of the user's without a run is not one
