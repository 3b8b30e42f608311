"""How our own errors end a process: one line, the traceback only when asked for.

A ``ConfigError`` (a params.yaml key or a flag, what is allowed) or an ``InputError`` (a file, a row, what was
wrong) says all a person needs; its traceback buries that line under hundreds of others (Kedro's rich
traceback, a torchrun worker's). ``install_excepthook`` makes the interpreter print such an error as one line;
anything else, and everything with ``ASR_PIPELINE_DEBUG=1`` (``asr-pipeline --debug``), keeps its traceback.
Used by the Kedro hook (``asr_pipeline.hooks``) and the torchrun worker; the ``asr-pipeline`` command prints
its errors itself (``cli``). Imports neither Kedro nor torch.
"""

from __future__ import annotations

import os
import re
import sys
from types import TracebackType

from asr_pipeline.io.report import InputError
from asr_pipeline.options import ConfigError

# Set (to anything but "", 0, false, no) to see the traceback behind a one-line error (asr-pipeline --debug).
DEBUG_ENV = "ASR_PIPELINE_DEBUG"
# The errors whose message is the whole story: written for a person, naming what to change.
ONE_LINE_ERRORS = (ConfigError, InputError)
ONE_LINE_NAMES = ("ConfigError", "InputError", "NothingKeptError")  # their names in a rank's error file


def debugging() -> bool:
    """Whether ``ASR_PIPELINE_DEBUG`` asks for tracebacks behind one-line errors."""
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no")


def one_line(error: BaseException) -> str | None:
    """The one line to print for ``error`` instead of its traceback; None: not one of ours, or debugging.

    A training whose first failing rank raised one of ours (``TrainingFailedError.root_cause``, e.g.
    "local rank 0: NothingKeptError: ...") is ours too: its first line, without the rank's frames."""
    if debugging():
        return None
    if isinstance(error, ONE_LINE_ERRORS):
        return " ".join(str(error).split("\n"))
    root_cause = getattr(error, "root_cause", None)  # training.launch.TrainingFailedError, not imported
    if isinstance(root_cause, str) and re.match(
        rf"local rank \d+: ({'|'.join(ONE_LINE_NAMES)}): ", root_cause
    ):
        return str(error).split("\n", 1)[0]
    return None


def install_excepthook(prefix: str = "error") -> None:
    """Wrap ``sys.excepthook`` (once per process) so that ``one_line`` errors print as
    ``<prefix>: <message> (traceback: ASR_PIPELINE_DEBUG=1)`` on stderr; the exit status stays 1."""
    if getattr(sys.excepthook, "one_line_errors", False):
        return
    previous = sys.excepthook

    def excepthook(kind: type[BaseException], error: BaseException, traceback: TracebackType | None) -> None:
        line = one_line(error)
        if line is None:
            previous(kind, error, traceback)
            return
        print(f"{prefix}: {line} (traceback: {DEBUG_ENV}=1)", file=sys.stderr, flush=True)

    excepthook.one_line_errors = True  # type: ignore[attr-defined]
    sys.excepthook = excepthook


__all__ = ["DEBUG_ENV", "ONE_LINE_ERRORS", "debugging", "install_excepthook", "one_line"]
