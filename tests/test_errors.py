"""errors: our own errors end a process as one line, anything else (or everything while debugging) keeps its
traceback; the hook wraps the interpreter's once."""

from __future__ import annotations

import sys

import pytest

from asr_pipeline.errors import DEBUG_ENV, debugging, install_excepthook, one_line
from asr_pipeline.io.report import InputError, NothingKeptError
from asr_pipeline.options import ConfigError


class RankFailure(RuntimeError):
    """Shaped like training.launch.TrainingFailedError: a message and the first failing rank's root cause."""

    def __init__(self, message: str, root_cause: str) -> None:
        super().__init__(message)
        self.root_cause = root_cause


@pytest.fixture(autouse=True)
def not_debugging(monkeypatch):
    monkeypatch.delenv(DEBUG_ENV, raising=False)


@pytest.mark.parametrize(
    ("value", "expected"), [("", False), ("0", False), (" No ", False), ("1", True), ("yes", True)]
)
def test_debugging_is_any_value_but_empty_zero_false_or_no(monkeypatch, value, expected):
    monkeypatch.setenv(DEBUG_ENV, value)

    assert debugging() is expected


def test_config_and_input_errors_are_one_line_with_their_newlines_joined():
    assert (
        one_line(ConfigError("train.optim.lr: must be > 0\ngot -1")) == "train.optim.lr: must be > 0 got -1"
    )
    assert one_line(NothingKeptError("all 3 rows skipped")) == "all 3 rows skipped"
    assert one_line(InputError("a.jsonl line 4: no text")) == "a.jsonl line 4: no text"


def test_other_errors_and_every_error_while_debugging_keep_their_traceback(monkeypatch):
    assert one_line(ValueError("plain")) is None
    assert one_line(RankFailure("training failed\nmore", "local rank 2: KeyError: 'x'")) is None
    monkeypatch.setenv(DEBUG_ENV, "1")
    assert one_line(ConfigError("bad key")) is None


def test_a_rank_that_failed_with_one_of_ours_gives_the_first_line_of_the_launchers_message():
    error = RankFailure("training failed: the first failure\n  File x", "local rank 3: ConfigError: bad key")

    assert one_line(error) == "training failed: the first failure"


def test_the_hook_prints_ours_as_one_line_passes_others_on_and_wraps_only_once(monkeypatch, capsys):
    passed_on = []
    monkeypatch.setattr(sys, "excepthook", lambda kind, error, tb: passed_on.append(error))

    install_excepthook("asr-pipeline")
    install_excepthook("again")  # a second install keeps the first wrapper
    ours, crash = ConfigError("unknown key 'lr'"), RuntimeError("boom")
    sys.excepthook(ConfigError, ours, None)
    sys.excepthook(RuntimeError, crash, None)

    assert capsys.readouterr().err == f"asr-pipeline: unknown key 'lr' (traceback: {DEBUG_ENV}=1)\n"
    assert passed_on == [crash]
