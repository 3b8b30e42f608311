"""A run dir has one writer at a time, and a new run never mixes with an old one (ARCHITECTURE 23).

- ``locked_run_dir``: an advisory lock (``fcntl.flock``) on ``<run dir>/.run.lock``, which holds the
  holder's pid. The kernel drops it when the holder dies, however it dies, so a killed run never leaves a
  stale lock. ``launch.run_training`` holds it for the whole run, from before the run dir is prepared
  until torchrun has exited, and tells the ranks so (``LOCK_HOLDER_ENV``); rank 0 of a run started by
  torchrun directly takes it itself (``rank_zero_lock``). A second run, or a resume, on a locked run dir
  is refused with the holder's pid.
- ``prepare_run_dir``: the one preparation of a run dir, for ``asr-pipeline train`` and the Kedro train
  node alike. A folder that already holds a run is refused unless the run resumes in place or the caller
  starts over explicitly (``--overwrite-output-dir``), which first deletes the previous run's files, and
  only those.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from asr_pipeline.decoding.run_resources import DECODING_FILE, LEXICON_FILE
from asr_pipeline.run_layout import (
    BEST_DIR,
    BEST_POINTER,
    CHECKPOINT_DIR,
    CHECKPOINT_POINTER,
    CONFIG_FILE,
    INDEX_FILE,
    KEPT_DIR,
    LOCK_FILE,
    METRICS_FILE,
    TOKENIZER_FILE,
    resolve_run_dir,
)
from asr_pipeline.training.config import TrainConfig
from asr_pipeline.training.dvclive_logger import DVCLIVE_DIR
from asr_pipeline.training.events import EVENTS_FILE
from asr_pipeline.training.finetune import MERGED_DIR

# Set by run_training for the ranks: the pid of the launcher that holds the run dir's lock for them.
LOCK_HOLDER_ENV = "ASR_PIPELINE_RUN_LOCK_HOLDER"
# A folder holding any of these holds a run (a finished checkpoint, a log, or at least a started config).
RUN_MARKERS = (CHECKPOINT_POINTER, EVENTS_FILE, CONFIG_FILE)
# Everything a run writes into its run dir; --overwrite-output-dir deletes these (and their .tmp/.old
# siblings) and nothing else, so a user's own files in the folder survive.
RUN_FILES = (
    CONFIG_FILE,
    EVENTS_FILE,
    METRICS_FILE,
    TOKENIZER_FILE,
    INDEX_FILE,
    CHECKPOINT_DIR,
    CHECKPOINT_POINTER,
    BEST_DIR,
    BEST_POINTER,
    KEPT_DIR,
    DVCLIVE_DIR,
    MERGED_DIR,
    LEXICON_FILE,  # decoding.run_resources: the run's lexicon and where its LMs were, from asr-pipeline train
    DECODING_FILE,
)


class RunDirLockedError(OSError):
    """Another live process holds the run dir's lock; ``pid`` is its pid (None if it wrote none yet)."""

    def __init__(self, run_dir: Path, pid: int | None) -> None:
        self.run_dir, self.pid = run_dir, pid
        holder = f"pid {pid}" if pid is not None else "a process that has not written its pid yet"
        super().__init__(
            f"{run_dir} is in use by another training ({holder} holds {run_dir / LOCK_FILE}): wait for it "
            f"to finish or stop it{f' (kill {pid})' if pid is not None else ''}, or train into another run dir "
            "(--output-dir)"
        )


@contextmanager
def locked_run_dir(run_dir: str | Path) -> Iterator[Path]:
    """Hold ``run_dir``'s lock (creating the folder) until the block ends; RunDirLockedError at once
    when another process holds it."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    fd = _acquire(run_dir)
    try:
        yield run_dir
    finally:
        _release(run_dir, fd)


@contextmanager
def rank_zero_lock(run_dir: str | Path, held_by: int | None) -> Iterator[None]:
    """Rank 0's hold on its run dir for the whole run: its own lock, unless ``held_by`` (the launcher's
    pid, ``LOCK_HOLDER_ENV``) is the process that holds it for this run."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        fd = _acquire(run_dir)
    except RunDirLockedError as error:
        if held_by is None or error.pid != held_by:
            raise
        fd = None  # the launcher's lock covers this run
    if fd is None:
        # Outside the except block: a training failure here must not read "during handling of
        # RunDirLockedError, another exception occurred".
        yield
        return
    try:
        yield
    finally:
        _release(run_dir, fd)


def _acquire(run_dir: Path) -> int:
    path = run_dir / LOCK_FILE
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(fd)
            os.close(fd)
            raise RunDirLockedError(run_dir, pid) from None
        # The holder before us unlinks the file before it unlocks; a lock on an unlinked file guards nothing.
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return fd
        os.close(fd)


def _release(run_dir: Path, fd: int) -> None:
    try:
        (run_dir / LOCK_FILE).unlink(missing_ok=True)  # still locked: no one can take the old file now
    finally:
        os.close(fd)


def _read_pid(fd: int) -> int | None:
    text = os.pread(fd, 32, 0).decode(errors="replace").strip()
    return int(text) if text.isdigit() else None


def holds_run(run_dir: str | Path) -> list[str]:
    """The run files ``run_dir`` holds that mark it as a run's folder (``RUN_MARKERS``); empty if none."""
    return [name for name in RUN_MARKERS if (Path(run_dir) / name).exists()]


def check_run_dir(config: TrainConfig, *, overwrite: bool = False) -> None:
    """Refuse to start ``config``'s run in a folder that already holds a run (FileExistsError), unless it
    resumes that run in place or ``overwrite`` starts over; refuse ``overwrite`` of the run it resumes from
    (ValueError). One line, naming the flags. Reads only."""
    run_dir = Path(config.run.output_dir)
    resume_dir = resolve_run_dir(config.run.resume_from) if config.run.resume_from else None
    in_place = resume_dir is not None and run_dir.resolve() == resume_dir.resolve()
    if overwrite and in_place:
        raise ValueError(
            f"--overwrite-output-dir would delete {run_dir}'s checkpoint that --resume-from continues from; "
            "give one of them"
        )
    found = holds_run(run_dir)
    if found and not in_place and not overwrite:
        raise FileExistsError(
            f"--output-dir {run_dir} already holds a run ({', '.join(found)}): continue it with "
            f"--resume-from {run_dir}, start over there with --overwrite-output-dir (deletes that run's files), "
            "or choose another --output-dir"
        )


def prepare_run_dir(
    config: TrainConfig, *, overwrite: bool = False, files: Mapping[str, bytes] | None = None
) -> Path:
    """Make ``config``'s run dir ready for its run: ``check_run_dir``, then with ``overwrite`` delete the
    previous run's files (``RUN_FILES`` only), then write ``files`` (name -> bytes: the tokenizer, the
    length index). The caller holds the run dir's lock (``locked_run_dir``)."""
    check_run_dir(config, overwrite=overwrite)
    run_dir = Path(config.run.output_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if overwrite:
        clear_run_files(run_dir)
    for name, data in (files or {}).items():
        (run_dir / name).write_bytes(data)
    return run_dir


def clear_run_files(run_dir: str | Path) -> list[str]:
    """Delete the run files (``RUN_FILES`` and their ``.tmp``/``.old`` siblings) in ``run_dir``; returns the
    names deleted. Anything else in the folder stays."""
    deleted = []
    for name in RUN_FILES:
        for candidate in (name, f"{name}.tmp", f"{name}.old"):
            path = Path(run_dir) / candidate
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
            else:
                continue
            deleted.append(candidate)
    return deleted


__all__ = [
    "LOCK_HOLDER_ENV",
    "RUN_FILES",
    "RUN_MARKERS",
    "RunDirLockedError",
    "check_run_dir",
    "clear_run_files",
    "holds_run",
    "locked_run_dir",
    "prepare_run_dir",
    "rank_zero_lock",
]
