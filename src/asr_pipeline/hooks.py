"""Kedro hooks: our own configuration and input errors end ``kedro run`` (and so ``dvc repro``) with one line.

Kedro lets an exception raised in a node reach the interpreter, whose exception hook -- rich's, installed by
Kedro's logging set-up -- prints some 300 lines of framed traceback, with the message that says what to fix
at the very end. A hook cannot swallow the exception (the run must still fail, so DVC records nothing), so
this one wraps ``sys.excepthook`` once the context exists (``errors.install_excepthook``): a ``ConfigError``
(a params.yaml key, what is allowed) or an ``InputError`` (a file, a row, what was wrong) is printed as one
line; anything else, and everything with ``ASR_PIPELINE_DEBUG=1``, keeps the full traceback.
"""

from __future__ import annotations

from typing import Any

from kedro.framework.hooks import hook_impl

from asr_pipeline.errors import install_excepthook


class OneLineErrors:
    """Our errors end the run with one line (module docstring)."""

    @hook_impl
    def after_context_created(self, context: Any) -> None:
        install_excepthook("error")  # after Kedro's logging set-up installed rich's hook, which it wraps
