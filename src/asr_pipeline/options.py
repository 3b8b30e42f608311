"""One way to turn a params mapping into a frozen options dataclass: unknown keys are named, never ignored,
and a value of the wrong type names its key."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

T = TypeVar("T")

# Types a plain params value is checked against (nested options and containers are checked by their own
# from_dict). A float field takes an int (YAML's `2` for 2.0); nothing takes a bool but a bool field.
_SCALARS = (bool, int, float, str)


class ConfigError(ValueError):
    """A configuration value that cannot be used. The message is one line naming the file or flag, the key
    and what is allowed; commands and ``kedro run`` print it without a traceback (``asr_pipeline.errors``)."""


def options_from_dict(cls: type[T], values: Mapping[str, Any] | None, section: str) -> T:
    """``cls(**values)``, after checking every key is a field of ``cls`` and every scalar value has the
    field's type.

    ``section`` names the params.yaml key in the message, so a typo points at the line to fix.
    """
    values = dict(values or {})
    known = [field.name for field in dataclasses.fields(cls)]  # type: ignore[arg-type]
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ConfigError(f"{section}: unknown option(s) {unknown}; the known options are {known}")
    try:  # the class's own checks first: their messages say more than a type name
        options = cls(**values)
    except TypeError:  # e.g. "lots" < 1 in a __post_init__: the type check below names the key
        _check_scalar_types(cls, values, section)
        raise
    _check_scalar_types(cls, values, section)
    return options


def _check_scalar_types(cls: type, values: Mapping[str, Any], section: str) -> None:
    for name, allowed in _scalar_types(cls).items():
        if name in values and not _is_instance(values[name], allowed):
            expected = " or ".join("null" if kind is type(None) else kind.__name__ for kind in allowed)
            raise ConfigError(f"{section}.{name}: expected {expected}, got {values[name]!r}")


def _scalar_types(cls: type) -> dict[str, tuple[type, ...]]:
    """Field name -> the allowed types, for fields annotated with scalars (optionally ``| None``) only."""
    try:
        hints = typing.get_type_hints(cls)
    except (NameError, TypeError):  # an annotation only importable under TYPE_CHECKING: no check
        return {}
    scalars = {}
    for name, hint in hints.items():
        union = typing.get_origin(hint) in (typing.Union, types.UnionType)
        members = typing.get_args(hint) if union else (hint,)
        if all(member in _SCALARS or member is type(None) for member in members):
            scalars[name] = tuple(members)
    return scalars


def _is_instance(value: Any, allowed: tuple[type, ...]) -> bool:
    if isinstance(value, bool):
        return bool in allowed
    if isinstance(value, int) and float in allowed:
        return True
    return isinstance(value, allowed)
