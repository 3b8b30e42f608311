"""The range checks every config section uses (a one-line ValueError naming the field)."""

from __future__ import annotations

from typing import Any


def positive(config: Any, *names: str) -> None:
    for name in names:
        value = getattr(config, name)
        if value is not None and value <= 0:
            raise ValueError(f"{name} must be > 0, got {value}")


def non_negative(config: Any, *names: str) -> None:
    for name in names:
        value = getattr(config, name)
        if value is not None and value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")
