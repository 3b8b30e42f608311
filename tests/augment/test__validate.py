"""augment._validate: config values are checked with a message that names the option, the rule and the value."""

from __future__ import annotations

import math

import pytest

from asr_pipeline.augment._validate import number, one_of, value_range


def test_one_of_accepts_an_allowed_value_and_names_the_choices_otherwise():
    one_of("kind", "noise", ("noise", "speed"))
    with pytest.raises(ValueError, match=r"kind must be one of \['noise', 'speed'\], got 'reverb'"):
        one_of("kind", "reverb", ("noise", "speed"))


def test_number_returns_a_float_within_an_open_low_and_closed_high_bound():
    assert number("p", 1, low=0, high=1) == 1.0 and isinstance(number("p", 1), float)
    with pytest.raises(ValueError, match=r"p must be in \(0, 1\], got 0"):
        number("p", 0, low=0, high=1)
    with pytest.raises(ValueError, match=r"p must be in \(-inf, 1\], got 1.5"):
        number("p", 1.5, high=1)
    with pytest.raises(ValueError, match="snr_db must be > 0, got -3"):
        number("snr_db", -3, low=0)


@pytest.mark.parametrize("value", [True, "3", None, math.nan, math.inf])
def test_number_refuses_what_is_not_a_finite_number(value):
    with pytest.raises(ValueError, match="gain must be a finite number"):
        number("gain", value)


def test_value_range_takes_a_number_or_an_ordered_pair():
    assert value_range("speed", 1.1) == (1.1, 1.1)
    assert value_range("speed", [0.9, 1.1]) == (0.9, 1.1)
    with pytest.raises(
        ValueError, match=r"speed must be a \[low, high\] pair with low <= high, got \[1.1, 0.9\]"
    ):
        value_range("speed", [1.1, 0.9])
    with pytest.raises(ValueError, match=r"speed must be a number or a \[low, high\] pair, got \[1, 2, 3\]"):
        value_range("speed", [1, 2, 3])
    with pytest.raises(ValueError, match="speed must be > 0, got 0"):
        value_range("speed", [0, 1], low=0)
