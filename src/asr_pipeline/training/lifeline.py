"""What a launcher starts dies with it, however the launcher dies (ARCHITECTURE 23).

The chain is ``asr-pipeline train`` or the Kedro node (the launcher, ``launch.run_training``) -> torchrun ->
one worker per rank. A ``kill -9`` of the launcher (or of its process group) runs no cleanup, and torchrun
starts each rank in a session of its own, so without these guards the ranks lived on with parent 1, still
writing ``events.jsonl`` and checkpoints into a run dir whose lock had died with the launcher.

- torchrun is started through this module (``python -m asr_pipeline.training.lifeline --parent PID --
  torchrun ...``): it asks the kernel for SIGKILL when its parent dies (``PR_SET_PDEATHSIG``), checks the
  parent is still the launcher, then ``exec``s torchrun, which keeps the setting. Not a ``preexec_fn``:
  that runs between fork and exec of a possibly multi-threaded launcher (a Kedro runner), where Python
  documents it as unsafe.
- each rank (``worker.main``) calls ``follow_launcher``: SIGKILL when its parent (torchrun) dies, a check
  that the chain launcher -> parent -> rank is still whole (a parent that died before the setting took
  effect is caught here), and a watchdog thread that ends the rank when the launcher's pid is gone (a
  pidfd: woken by the kernel, immune to pid reuse).

Linux only (prctl, pidfd, /proc); elsewhere the watchdog polls the launcher's pid once a second.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence

# The launcher's pid, set by launch.launch_training for torchrun and (inherited) for every rank.
LAUNCHER_PID_ENV = "ASR_PIPELINE_LAUNCHER_PID"
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# A rank whose launcher is gone ends with this status (128 + SIGKILL, as if the kernel had killed it).
ORPHANED_EXIT = 128 + signal.SIGKILL


class ParentGoneError(RuntimeError):
    """The process this one must die with had already died when the guard was set."""


def set_parent_death_signal(signum: int = signal.SIGKILL) -> bool:
    """Ask the kernel to send ``signum`` to this process when its parent exits; False where prctl is
    unavailable (not Linux). The setting survives ``exec`` and is cleared in forked children."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return False
    return prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0


def die_with_parent(expected_parent: int) -> None:
    """SIGKILL this process when its parent dies; ParentGoneError when the parent is no longer
    ``expected_parent`` (it died before the setting took effect, so no signal would ever come)."""
    set_parent_death_signal()
    if os.getppid() != expected_parent:
        raise ParentGoneError(
            f"process {os.getpid()}: its parent {expected_parent} is gone (parent now {os.getppid()})"
        )


def parent_of(pid: int) -> int | None:
    """``pid``'s parent pid from /proc, or None when ``pid`` is gone or /proc is unavailable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ")"
            return int(stat.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def follow_launcher(environ: Mapping[str, str] = os.environ) -> threading.Thread | None:
    """In a rank started by ``launch.launch_training`` (``LAUNCHER_PID_ENV`` set): die with torchrun and
    with the launcher (module docstring). Ends this process at once (``ORPHANED_EXIT``) when either is
    already gone. Returns the watchdog thread; None when no launcher is named (a run started by hand)."""
    given = environ.get(LAUNCHER_PID_ENV)
    if not given:
        return None
    launcher = int(given)
    parent = os.getppid()
    set_parent_death_signal()
    if os.getppid() != parent:  # it died before the setting took effect: no signal will come
        _orphaned(f"its parent {parent} exited")
    # The rank is launcher -> torchrun -> rank (or a direct child): a parent that is neither was reparented.
    if parent != launcher and parent_of(parent) != launcher:
        _orphaned(f"its launcher {launcher} no longer owns its parent {parent}")
    watchdog = threading.Thread(
        target=_watch, args=(launcher,), name="asr-pipeline-launcher-watchdog", daemon=True
    )
    watchdog.start()
    return watchdog


def wait_exited(pid: int, timeout: float | None = None) -> bool:
    """Whether process ``pid`` (any process, not only a child) has exited within ``timeout`` seconds (None:
    wait for it). A pidfd becomes readable when the process exits, so nothing polls, and a reused pid cannot
    fool it. OSError (AttributeError before Python 3.9) where pidfds are unavailable (not Linux >= 5.3)."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        waiter = select.poll()  # poll, not select: a pidfd may be numbered past select's 1024
        waiter.register(pidfd, select.POLLIN)
        return bool(waiter.poll(None if timeout is None else max(timeout, 0.0) * 1000))  # poll(-1) blocks
    finally:
        os.close(pidfd)


def _watch(launcher: int) -> None:
    """Block until ``launcher`` exits, then end this process."""
    try:
        wait_exited(launcher)
    except (AttributeError, OSError):  # no pidfd (not Linux >= 5.3): poll
        while _alive(launcher):
            time.sleep(1.0)
    _orphaned(f"its launcher {launcher} is gone")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _orphaned(why: str) -> None:
    print(f"[worker] rank process {os.getpid()} stops: {why}", file=sys.stderr, flush=True)
    os._exit(ORPHANED_EXIT)  # every thread, no cleanup: the run dir's lock died with the launcher


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m asr_pipeline.training.lifeline --parent PID -- COMMAND ...``: exec COMMAND, killed
    when PID (this process's parent) dies."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--parent", type=int, required=True, help="the pid whose death ends COMMAND")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to exec")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given after --")
    try:
        die_with_parent(args.parent)
    except ParentGoneError as error:
        print(f"[launch] not starting {command[0]}: {error}", file=sys.stderr, flush=True)
        sys.exit(ORPHANED_EXIT)
    os.execv(command[0], command)


__all__ = [
    "LAUNCHER_PID_ENV",
    "ORPHANED_EXIT",
    "ParentGoneError",
    "die_with_parent",
    "follow_launcher",
    "parent_of",
    "set_parent_death_signal",
]


if __name__ == "__main__":
    main()
