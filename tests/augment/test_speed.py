"""speed_perturb: resample and reinterpret, so length and pitch change together (Ko et al., 2015)."""

from __future__ import annotations

import numpy as np
import pytest

from asr_pipeline.augment import speed_perturb
from tests.augment.signals import RATE, peak_frequency, sine


@pytest.mark.parametrize("factor", [1.1, 0.9])
def test_speed_factor_scales_length_by_one_over_factor_and_pitch_by_factor(factor):
    tone = sine(1000.0)  # (16000,)
    faster = speed_perturb(tone, RATE, factor)
    assert abs(len(faster) - round(len(tone) / factor)) <= 1  # 1.1: 14545 ± 1, 0.9: 17778 ± 1
    assert faster.dtype == np.float32
    assert peak_frequency(faster, RATE) == pytest.approx(1000.0 * factor, abs=2.0)  # 1100 / 900 Hz


def test_speed_works_at_any_sample_rate():
    tone = sine(1000.0, seconds=0.5, sample_rate=22050)
    faster = speed_perturb(tone, 22050, 1.1)
    assert abs(len(faster) - round(len(tone) / 1.1)) <= 1
    assert peak_frequency(faster, 22050) == pytest.approx(1100.0, abs=4.0)


def test_speed_factor_1_returns_the_input_unchanged():
    tone = sine(1000.0, seconds=0.1)
    assert speed_perturb(tone, RATE, 1.0) is tone


@pytest.mark.parametrize("factor", [0.0, -0.5, 3.5, float("nan"), "fast"])
def test_speed_factor_outside_0_to_3_is_refused_naming_the_range(factor):
    with pytest.raises(ValueError, match=r"speed factor must be in \(0, 3\]"):
        speed_perturb(sine(1000.0, seconds=0.1), RATE, factor)
