"""The one config engine: a params mapping to a typed dataclass and back, and the fields' facts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import pytest

from asr_pipeline.options import (
    ConfigError,
    deep_merge,
    expand_dotted,
    from_dict,
    options_from_dict,
    parse_value,
    reference_values,
    setting,
    shared_setting,
    to_dict,
    walk,
)


@dataclass(frozen=True, kw_only=True)
class Inner:
    rate: float = setting(0.5, help="a rate", flag="rate", reference=0.1)
    kind: Literal["a", "b"] = setting("a", help="a kind", flag="--kind")

    def __post_init__(self) -> None:
        if self.rate < 0:
            raise ValueError(f"rate must be >= 0, got {self.rate}")


@dataclass(frozen=True, kw_only=True)
class Outer:
    name: str = setting(help="required")
    epochs: list[int] = setting(default_factory=list, help="epochs")
    resets: dict[int, float] = setting(default_factory=dict, help="epoch -> rate")
    grid: Mapping[str, Sequence[float]] = field(default_factory=dict)
    inner: Inner = setting(default_factory=Inner, help="nested", flag_prefix="--in-")
    maybe: Inner | None = None


def test_a_nested_mapping_builds_every_section_and_converts_ints_for_floats():
    config = from_dict(Outer, {"name": "x", "inner": {"rate": 2}, "epochs": [1, 2], "grid": {"w": [0, 1.5]}})

    assert config.inner == Inner(rate=2.0) and isinstance(config.inner.rate, float)
    assert config.epochs == [1, 2] and config.grid == {"w": [0, 1.5]}
    assert from_dict(Outer, to_dict(config)) == config, "to_dict reads back to an equal config"


def test_json_string_keys_become_the_int_keys_the_field_declares():
    assert from_dict(Outer, {"name": "x", "resets": {"30": 1e-3}}).resets == {30: 1e-3}


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"name": "x", "inner": {"rat": 1}},
            r"unknown config keys: inner\.rat \(the inner section accepts: rate, kind\)",
        ),
        ({"name": "x", "epochs": "3"}, r"epochs: expected a list, got '3'"),
        ({"name": "x", "epochs": [1, "b"]}, r"epochs\[1\]: expected int, got 'b'"),
        ({"name": "x", "inner": {"kind": "c"}}, r"inner\.kind: expected one of \['a', 'b'\], got 'c'"),
        ({"name": "x", "inner": {"rate": -1}}, r"inner: rate must be >= 0, got -1"),
        ({}, r"missing required config keys: name"),
    ],
)
def test_every_problem_is_one_line_naming_its_dotted_key(values, message):
    with pytest.raises(ConfigError, match=message):
        from_dict(Outer, values)


def test_the_classs_own_check_speaks_before_a_type_name():
    # "lots" is no float, but Inner's check trips over it first only as a TypeError: the type error is named
    with pytest.raises(ConfigError, match=r"params\.rate: expected float, got 'lots'"):
        options_from_dict(Inner, {"rate": "lots"}, "params")


def test_options_from_dict_lists_the_known_options_on_a_typo():
    with pytest.raises(
        ConfigError, match=r"params: unknown option\(s\) \['rat'\]; the known options are \['rate', 'kind'\]"
    ):
        options_from_dict(Inner, {"rat": 1}, "params")


def test_walk_gives_dotted_keys_flags_with_their_section_prefix_and_defaults():
    fields = {f.key: f for f in walk(Outer)}

    assert fields["inner.rate"].flag == "--in-rate", "a relative flag takes the section's prefix"
    assert fields["inner.kind"].flag == "--kind", "an absolute flag does not"
    assert fields["epochs"].default == [] and fields["name"].flag is None
    assert "maybe" in fields, "an optional section is one field, not expanded"


def test_reference_values_lists_the_fields_whose_reference_default_differs():
    assert reference_values(Outer) == {"inner.rate": 0.1}


def test_dotted_keys_expand_and_merge_key_by_key():
    merged = deep_merge({"a": {"b": 1, "c": 2}}, expand_dotted({"a.c": 3, "d": 4}))

    assert merged == {"a": {"b": 1, "c": 3}, "d": 4}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("5e-3", 0.005),
        ("3", 3),
        ("1.5", 1.5),
        ("null", None),
        ("true", True),
        ("abc", "abc"),
        ("[1, 2]", [1, 2]),
    ],
)
def test_a_command_line_value_reads_as_yaml_with_exponent_floats(text, value):
    assert parse_value(text) == value


@dataclass(frozen=True, kw_only=True)
class Sharing:
    """Two of Inner's and Outer's fields declared again, one at another default with another shown default."""

    rate: float = shared_setting(Inner, "rate", 0.25, shown_default="a quarter")
    epochs: list[int] = shared_setting(Outer, "epochs")


def test_a_shared_setting_keeps_its_owners_help_and_flag_and_states_only_what_differs():
    shared = {field.key: field for field in walk(Sharing)}
    owned = {field.key: field for field in walk(Inner)}

    rate = shared["rate"]
    assert (rate.setting.help, rate.flag, rate.setting.reference) == ("a rate", "--rate", 0.1)
    assert (rate.default, rate.setting.shown_default, owned["rate"].default) == (0.25, "a quarter", 0.5)
    assert shared["epochs"].default == [] and Sharing().epochs is not Sharing().epochs  # a fresh list each
    with pytest.raises(ValueError, match="Outer has no field 'grid' declared with setting"):
        shared_setting(Outer, "grid")
