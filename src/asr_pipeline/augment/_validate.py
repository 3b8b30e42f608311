"""Checks of config values that name the option in their message (conditions, mix)."""

from __future__ import annotations

import numpy as np


def one_of(name: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {list(allowed)}, got {value!r}")


def number(name: str, value: object, low: float | None = None, high: float | None = None) -> float:
    """``value`` as a float, or ValueError naming ``name``; ``low`` is exclusive, ``high`` inclusive."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not np.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if (low is not None and value <= low) or (high is not None and value > high):
        if high is None:
            raise ValueError(f"{name} must be > {low:g}, got {value!r}")
        raise ValueError(
            f"{name} must be in ({'-inf' if low is None else f'{low:g}'}, {high:g}], got {value!r}"
        )
    return float(value)


def value_range(name: str, value: object, low: float | None = None) -> tuple[float, float]:
    """A number or a [low, high] pair as a (low, high) tuple of floats."""
    pair = value if isinstance(value, list | tuple) else (value, value)
    if len(pair) != 2:
        raise ValueError(f"{name} must be a number or a [low, high] pair, got {value!r}")
    first, second = (number(name, item, low=low) for item in pair)
    if first > second:
        raise ValueError(f"{name} must be a [low, high] pair with low <= high, got {value!r}")
    return first, second
