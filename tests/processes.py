"""Helpers for tests that kill processes: wait for any pid to exit, list a process's descendants."""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path


def wait_gone(pid: int, timeout: float) -> bool:
    """Whether process ``pid`` (not necessarily our child) exits within ``timeout`` seconds: a pidfd becomes
    readable when it does, so nothing polls."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([pidfd], [], [], timeout)
        return bool(readable)
    finally:
        os.close(pidfd)


def descendants(pid: int) -> dict[int, str]:
    """Every live descendant of ``pid``: pid -> command line (from /proc)."""
    parents, commands = {}, {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_bytes()
            commands[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses
        parents[int(entry.name)] = int(stat.rsplit(b")", 1)[1].split()[1])
    found: dict[int, str] = {}
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - set(found)
        found.update({child: commands[child] for child in frontier})
    return found


@contextlib.contextmanager
def lock_held_elsewhere(run_dir: Path) -> Iterator[subprocess.Popen]:
    """A child process holding ``run_dir``'s lock the way a training does (``flock`` on ``.run.lock`` with its
    pid in it), written out here rather than through ``training.run_dir``; killed on exit."""
    code = f"""
        import fcntl, os, time
        with open({str(Path(run_dir) / ".run.lock")!r}, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            lock.write(f"{{os.getpid()}}\\n")
            lock.flush()
            print("locked", flush=True)
            time.sleep(120)
    """
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        yield holder
    finally:
        holder.kill()
        holder.wait()
