"""What the launcher starts dies with it: torchrun through lifeline's parent-death guard, a rank through
``follow_launcher`` (the parent-death signal for torchrun, a watchdog on the launcher). Each test builds
the process chain it needs from plain Python processes; the real torchrun chain is killed in
tests/cli/test_train_run_dir.py."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import textwrap

import pytest

from asr_pipeline.training.lifeline import LAUNCHER_PID_ENV, ORPHANED_EXIT, parent_of, wait_exited

DEADLINE_SEC = 20.0


def python(code: str, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], text=True, **popen)


def kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def test_a_command_started_through_the_lifeline_dies_when_its_parent_is_killed():
    # parent -> lifeline (exec'd into sh, which says it runs, then into sleep); the parent reports its pid.
    parent = python(
        """
        import subprocess, sys, time
        child = subprocess.Popen(
            [sys.executable, "-m", "asr_pipeline.training.lifeline", "--parent", str(__import__("os").getpid()),
             "--", "/bin/sh", "-c", "echo started; exec sleep 120"],
            stdout=subprocess.PIPE, text=True,
        )
        child.stdout.readline()  # the guard is set: the command runs
        print(child.pid, flush=True)
        time.sleep(120)
        """,
        stdout=subprocess.PIPE,
    )
    child = int(parent.stdout.readline())
    try:
        assert parent_of(child) == parent.pid
        parent.kill()
        parent.wait()
        assert wait_exited(child, DEADLINE_SEC), f"the command {child} outlived its killed parent"
    finally:
        kill(child)


def test_the_lifeline_refuses_to_start_a_command_for_a_parent_that_is_not_its_own(tmp_path):
    marker = tmp_path / "ran"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "asr_pipeline.training.lifeline",
            "--parent",
            "1",
            "--",
            "/bin/touch",
            str(marker),
        ],
        capture_output=True,
        text=True,
    )

    assert done.returncode == ORPHANED_EXIT
    assert "its parent 1 is gone" in done.stderr and not marker.exists()


# A rank: follow_launcher, then report its pid and sleep (the launcher's pid comes from the environment).
RANK = textwrap.dedent(
    """
    import os, time
    from asr_pipeline.training.lifeline import follow_launcher
    follow_launcher()
    print(os.getpid(), flush=True)
    time.sleep(120)
    """
)


def start_chain() -> tuple[subprocess.Popen, int, int]:
    """launcher -> middle (a stand-in for torchrun, unguarded) -> rank (``RANK``, told the launcher's pid):
    the launcher process and the two pids below it."""
    launcher = python(
        f"""
        import os, subprocess, sys, time
        env = {{**os.environ, {LAUNCHER_PID_ENV!r}: str(os.getpid())}}
        middle = subprocess.Popen(
            [sys.executable, "-c", "import subprocess, sys, time; "
             "subprocess.Popen([sys.executable, '-c', sys.argv[1]]); time.sleep(120)", {RANK!r}],
            env=env,
        )
        print(middle.pid, flush=True)
        time.sleep(120)
        """,
        stdout=subprocess.PIPE,
    )
    middle = int(launcher.stdout.readline())
    rank = int(launcher.stdout.readline())  # the rank inherited the launcher's stdout
    return launcher, middle, rank


def test_a_rank_exits_when_its_launcher_is_killed_even_if_its_own_parent_lives_on():
    # launcher -> middle (stands in for torchrun, outlives the launcher) -> rank: only the watchdog can act.
    launcher, middle, rank = start_chain()
    try:
        assert parent_of(rank) == middle and parent_of(middle) == launcher.pid
        launcher.kill()
        launcher.wait()
        assert wait_exited(rank, DEADLINE_SEC), f"rank {rank} outlived its killed launcher"
        assert not wait_exited(middle, 0.2), (
            "the middle process has no guard: only the watchdog ended the rank"
        )
    finally:
        kill(rank)
        kill(middle)


def test_a_rank_whose_launcher_is_already_gone_stops_at_once():
    dead = subprocess.Popen(["/bin/true"])
    dead.wait()
    rank = python(RANK, env={**os.environ, LAUNCHER_PID_ENV: str(dead.pid)}, stderr=subprocess.PIPE)

    assert rank.wait(timeout=DEADLINE_SEC) == ORPHANED_EXIT
    assert f"its launcher {dead.pid}" in rank.stderr.read()


def test_a_rank_dies_with_its_parent_by_the_parent_death_signal():
    # launcher -> parent -> rank; the parent is killed while the launcher lives: the kernel's signal acts.
    launcher, parent, rank = start_chain()
    try:
        kill(parent)
        assert wait_exited(rank, DEADLINE_SEC), f"rank {rank} outlived its killed parent"
    finally:
        kill(rank)
        launcher.kill()
        launcher.wait()


def test_without_a_launcher_in_the_environment_a_process_is_left_alone(monkeypatch):
    from asr_pipeline.training.lifeline import follow_launcher

    monkeypatch.delenv(LAUNCHER_PID_ENV, raising=False)

    assert follow_launcher() is None


def test_parent_of_names_a_live_process_parent_and_none_for_a_gone_one():
    gone = subprocess.Popen(["/bin/true"])
    gone.wait()

    assert parent_of(os.getpid()) == os.getppid()
    assert parent_of(gone.pid) is None


def test_wait_exited_sees_an_exit_even_when_the_pidfd_is_numbered_past_1024():
    # A long test session (or a launcher with many shards open) holds over a thousand descriptors: select()
    # refuses descriptor 1024 and up, which failed CI once; poll does not.
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1100:
        pytest.skip(f"the descriptor limit ({soft}) is below 1100")
    held = []
    with open(os.devnull) as null:
        while not held or held[-1] < 1030:
            held.append(os.dup(null.fileno()))
        try:
            sleeper = subprocess.Popen(["sleep", "0.2"])
            assert not wait_exited(sleeper.pid, 0.0)
            assert wait_exited(sleeper.pid, DEADLINE_SEC)
            sleeper.wait()
            assert wait_exited(sleeper.pid, 0.0)  # reaped: no such process
        finally:
            for fd in held:
                os.close(fd)
