"""Kedro hooks: our own configuration and input errors end ``kedro run`` (and so ``dvc repro``) with one line.

Kedro lets an exception raised in a node reach the interpreter, whose exception hook -- rich's, installed by
Kedro's logging set-up -- prints some 300 lines of framed traceback, with the message that says what to fix
at the very end. A hook cannot swallow the exception (the run must still fail, so DVC records nothing), so
this one wraps ``sys.excepthook`` once the context exists: a ``ConfigError`` (a params.yaml key, what is
allowed) or an ``InputError`` (a file, a row, what was wrong) is printed as one line; anything else, and
everything with ``ASR_PIPELINE_DEBUG=1``, keeps the full traceback.
"""

from __future__ import annotations

import re
import sys
from types import TracebackType
from typing import Any

from kedro.framework.hooks import hook_impl

from asr_pipeline.io.report import InputError
from asr_pipeline.options import DEBUG_ENV, ConfigError, debugging

# The errors whose message is the whole story: written for a person, naming what to change.
ONE_LINE_ERRORS = (ConfigError, InputError)
ONE_LINE_NAMES = ("ConfigError", "InputError", "NothingKeptError")  # their names in a rank's error file


def one_line(error: BaseException) -> str | None:
    """The one line to print for ``error`` instead of its traceback; None: not one of ours, or debugging.

    A training stage whose first failing rank raised one of ours (``TrainingFailedError.root_cause``, e.g.
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


class OneLineErrors:
    """Wraps the interpreter's exception hook so that ``one_line`` errors print one line (module docstring)."""

    @hook_impl
    def after_context_created(self, context: Any) -> None:
        if getattr(sys.excepthook, "one_line_errors", False):  # a second session in the same process
            return
        previous = sys.excepthook

        def excepthook(
            kind: type[BaseException], error: BaseException, traceback: TracebackType | None
        ) -> None:
            line = one_line(error)
            if line is None:
                previous(kind, error, traceback)
                return
            print(f"error: {line} (traceback: {DEBUG_ENV}=1)", file=sys.stderr, flush=True)

        excepthook.one_line_errors = True  # type: ignore[attr-defined]
        sys.excepthook = excepthook
