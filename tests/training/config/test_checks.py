"""training.config.checks: the range checks every config section uses name the field and its value; an unset
(None) field passes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from asr_pipeline.training.config.checks import non_negative, positive


def test_positive_refuses_zero_and_below_naming_the_first_bad_field():
    config = SimpleNamespace(epochs=3, batch_size=0, rate=-1.0, unset=None)

    positive(config, "epochs", "unset")
    with pytest.raises(ValueError, match=r"^batch_size must be > 0, got 0$"):
        positive(config, "epochs", "batch_size", "rate")


def test_non_negative_takes_zero_and_refuses_below_it():
    config = SimpleNamespace(workers=0, delta=-0.5, unset=None)

    non_negative(config, "workers", "unset")
    with pytest.raises(ValueError, match=r"^delta must be >= 0, got -0.5$"):
        non_negative(config, "delta")
