"""Helpers for tests that kill processes: list a process's descendants, hold a run dir's lock elsewhere
(waiting for any pid to exit is ``training.lifeline.wait_exited``)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

from asr_pipeline.training.lifeline import parent_of


def descendants(pid: int) -> dict[int, str]:
    """Every live descendant of ``pid``: pid -> command line (from /proc)."""
    parents, commands = {}, {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            commands[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        parent = parent_of(int(entry.name))
        if parent is not None:
            parents[int(entry.name)] = parent
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
