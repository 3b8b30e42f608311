"""cli.config_flags: a config dataclass's fields become argparse options (type, choices, switch, aliases,
stated default); an unset flag stays None so a --config file's value stands; given flags become dotted keys;
--set reads KEY=VALUE as YAML. A toy config stands in for the training config here."""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field
from typing import Literal

import pytest

from asr_pipeline.cli.config_flags import add_config_flags, config_flags, given_overrides, parse_assignment
from asr_pipeline.options import setting


@dataclass(frozen=True)
class Schedule:
    epochs: int = setting(10, help="epochs to train", flag="--epochs", aliases=("--num-epochs",))
    decay: Literal["linear", "cosine"] = setting("linear", help="the decay's shape", flag="--decay")
    milestones: list[int] = setting(
        default_factory=list, help="epochs where the rate halves", flag="--milestones"
    )
    rates: dict[int, float] = setting(default_factory=dict, help="epoch:rate pairs", flag="--rates")
    note: str | None = setting(None, help="not a flag")


@dataclass(frozen=True)
class Toy:
    schedule: Schedule = field(default_factory=Schedule)
    amp: bool = setting(False, help="mixed precision at 100%", flag="--amp")
    clip: float | None = setting(
        5.0, help="gradient clip", flag="--clip", shown_default="5.0 (none in the ref)"
    )


def parser() -> tuple[argparse.ArgumentParser, list]:
    flags = config_flags(Toy)
    parsed = argparse.ArgumentParser(prog="toy", add_help=False)
    add_config_flags(parsed, flags)
    return parsed, flags


def test_every_field_with_a_flag_becomes_an_option_in_field_order():
    flags = config_flags(Toy)

    assert [(f.flag, f.key) for f in flags] == [
        ("--epochs", "schedule.epochs"),
        ("--decay", "schedule.decay"),
        ("--milestones", "schedule.milestones"),
        ("--rates", "schedule.rates"),
        ("--amp", "amp"),
        ("--clip", "clip"),
    ]
    assert flags[1].choices == ["linear", "cosine"] and flags[4].parse is None and flags[4].const is True


def test_given_flags_become_dotted_keys_with_their_types_and_unset_ones_stay_out():
    parsed, flags = parser()

    args = parsed.parse_args(
        ["--num-epochs", "3", "--milestones", "5, 8", "--rates", "30:1e-3,60:5e-4", "--amp"]
    )

    assert given_overrides(args, flags) == {
        "schedule.epochs": (3, "--epochs"),
        "schedule.milestones": ([5, 8], "--milestones"),
        "schedule.rates": ({30: 1e-3, 60: 5e-4}, "--rates"),
        "amp": (True, "--amp"),
    }
    assert given_overrides(parsed.parse_args([]), flags) == {}  # nothing overrides a --config file


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--decay", "step"], "invalid choice: 'step'"),
        (["--milestones", "5,x"], "expected comma-separated int values, got '5,x'"),
        (["--rates", "30=1e-3"], r"expected KEY:VALUE pairs \(int:float\) such as 30:1e-3,60:5e-4"),
        (["--epochs", "three"], "invalid int value: 'three'"),
    ],
)
def test_a_bad_value_is_refused_by_argparse_with_the_parsers_message(argv, message, capsys):
    parsed, _ = parser()

    with pytest.raises(SystemExit):
        parsed.parse_args(argv)

    assert re.search(message, capsys.readouterr().err)


def test_help_states_the_default_unless_there_is_none_to_state():
    parsed, _ = parser()
    text = parsed.format_help()

    assert "epochs to train (default: 10)" in text
    assert "gradient clip (default: 5.0 (none in the ref))" in text
    assert "mixed precision at 100%" in text and "100% (default" not in text  # a switch states no default
    assert "epochs where the rate halves (default" not in text  # an empty list states none


def test_set_reads_key_equals_value_with_the_value_as_yaml():
    assert parse_assignment("optim.epochs=3") == ("optim.epochs", 3)
    assert parse_assignment(" data.tags = [a, b]") == ("data.tags", ["a", "b"])
    assert parse_assignment("run.resume_from=") == ("run.resume_from", None)
    for text, message in [
        ("epochs", "expected KEY=VALUE"),
        ("=3", "expected KEY=VALUE"),
        ("a=[1", "not YAML"),
    ]:
        with pytest.raises(argparse.ArgumentTypeError, match=message):
            parse_assignment(text)
