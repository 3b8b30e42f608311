"""One way to turn a params mapping into a frozen options dataclass: unknown keys are named, never ignored."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

T = TypeVar("T")


def options_from_dict(cls: type[T], values: Mapping[str, Any] | None, section: str) -> T:
    """``cls(**values)``, after checking every key is a field of ``cls``.

    ``section`` names the params.yaml key in the message, so a typo points at the line to fix.
    """
    values = dict(values or {})
    known = [field.name for field in dataclasses.fields(cls)]  # type: ignore[arg-type]
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ValueError(f"{section}: unknown option(s) {unknown}; the known options are {known}")
    return cls(**values)
