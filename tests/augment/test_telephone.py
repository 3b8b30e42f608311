"""telephone_band: 8 kHz, 300–3400 Hz, μ-law, back at the original rate."""

from __future__ import annotations

import numpy as np
import pytest

from asr_pipeline.augment import telephone_band
from tests.augment.signals import RATE, sine, snr_db, tone_level_db


def gain_db(freq_hz: float, sample_rate: int = RATE, mu_law: bool = True) -> float:
    tone = sine(freq_hz, seconds=0.5, sample_rate=sample_rate)
    phone = telephone_band(tone, sample_rate, mu_law=mu_law)
    return tone_level_db(phone, sample_rate, freq_hz) - tone_level_db(tone, sample_rate, freq_hz)


@pytest.mark.parametrize("freq_hz", [100.0, 6000.0])
def test_telephone_removes_hum_below_and_everything_above_the_voice_band(freq_hz):
    assert gain_db(freq_hz) < -30.0  # measured: 100 Hz -38 dB, 6 kHz -110 dB


def test_telephone_keeps_1_khz():
    assert gain_db(1000.0) == pytest.approx(0.0, abs=1.0)


def test_telephone_keeps_length_and_rate_at_any_sample_rate():
    for sample_rate in (16000, 22050, 8000):
        tone = sine(1000.0, seconds=0.3, sample_rate=sample_rate)
        phone = telephone_band(tone, sample_rate)
        assert phone.shape == tone.shape and phone.dtype == np.float32
    assert gain_db(100.0, sample_rate=22050) < -30.0


def test_mu_law_adds_8_bit_quantization_noise_about_40_db_down():
    tone = sine(1000.0, seconds=0.5)
    companded, linear = telephone_band(tone, RATE), telephone_band(tone, RATE, mu_law=False)
    assert 30.0 < snr_db(linear, companded) < 50.0  # measured 40.6 dB; G.711 is specified near 38 dB


def test_a_band_outside_the_8_khz_channel_is_refused():
    with pytest.raises(ValueError, match="0 < low_hz < high_hz < 4000"):
        telephone_band(sine(1000.0, seconds=0.1), RATE, low_hz=300.0, high_hz=5000.0)
