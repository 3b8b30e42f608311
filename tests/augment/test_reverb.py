"""Synthetic room impulse responses (exponential-decay model) and FFT reverberation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from asr_pipeline.augment import reverberate, synthetic_rir
from tests.augment.signals import RATE


def schroeder_decay_db(rir: np.ndarray) -> np.ndarray:
    """Schroeder's backward-integrated energy decay curve, in dB relative to the total energy."""
    energy = np.cumsum((rir.astype(np.float64) ** 2)[::-1])[::-1]
    return 10 * np.log10(energy / energy[0])


@pytest.mark.parametrize("rt60_sec", [0.3, 0.8])
def test_rir_energy_decays_60_db_near_rt60(rt60_sec):
    rir = synthetic_rir(RATE, rt60_sec, np.random.default_rng(0))
    decay = schroeder_decay_db(rir)
    reaches_minus_60_sec = np.argmax(decay <= -60.0) / RATE
    assert reaches_minus_60_sec == pytest.approx(rt60_sec, rel=0.2)
    # T30, the way RT60 is measured in a room: the -5..-35 dB slope extrapolated to -60 dB.
    fitted = (decay <= -5.0) & (decay >= -35.0)
    slope_db_per_sec = np.polyfit(np.flatnonzero(fitted) / RATE, decay[fitted], 1)[0]
    assert -60.0 / slope_db_per_sec == pytest.approx(rt60_sec, rel=0.1)


def test_rir_lasts_1_2_rt60_at_unit_energy():
    rir = synthetic_rir(RATE, 0.5, np.random.default_rng(0))
    assert rir.shape == (math.ceil(1.2 * 0.5 * RATE),) and rir.dtype == np.float32
    assert np.sum(rir.astype(np.float64) ** 2) == pytest.approx(1.0, rel=1e-5)


@pytest.mark.parametrize("direct_to_reverb_db", [-6.0, 0.0, 10.0])
def test_rir_direct_path_is_sample_0_at_the_requested_direct_to_reverb_ratio(direct_to_reverb_db):
    rir = synthetic_rir(RATE, 0.4, np.random.default_rng(0), direct_to_reverb_db).astype(np.float64)
    measured = 10 * np.log10(rir[0] ** 2 / np.sum(rir[1:] ** 2))
    assert measured == pytest.approx(direct_to_reverb_db, abs=1e-3)


def test_rir_has_sparse_early_reflections_standing_out_of_the_first_50_ms():
    rir = synthetic_rir(RATE, 0.5, np.random.default_rng(0))
    early = np.abs(rir[1 : round(0.05 * RATE)])
    assert np.sum(early > 4 * np.median(early)) >= 4  # distinct echoes, not only a smooth tail


def test_rir_is_reproducible_from_the_generator_and_refuses_a_non_positive_rt60():
    np.testing.assert_array_equal(
        synthetic_rir(RATE, 0.3, np.random.default_rng(5)), synthetic_rir(RATE, 0.3, np.random.default_rng(5))
    )
    with pytest.raises(ValueError, match="rt60_sec must be a positive"):
        synthetic_rir(RATE, 0.0, np.random.default_rng(0))


def test_reverberating_an_impulse_gives_the_rir_back():
    rir = synthetic_rir(RATE, 0.2, np.random.default_rng(0))
    impulse = np.zeros(RATE // 2, np.float32)
    impulse[0] = 0.5
    wet = reverberate(impulse, rir)
    scaled_rir = rir[: len(impulse)] * (wet[0] / rir[0])
    np.testing.assert_allclose(wet[: len(rir)], scaled_rir[: len(wet)], atol=1e-6)


def test_reverberation_keeps_length_and_rms_and_fills_the_pauses():
    speech = np.zeros(RATE // 2, np.float32)
    speech[:1600] = 0.3 * np.random.default_rng(0).standard_normal(1600)  # 0.1 s of sound, then a pause
    wet = reverberate(speech, synthetic_rir(RATE, 0.6, np.random.default_rng(0)))
    assert wet.shape == speech.shape and wet.dtype == np.float32
    rms = lambda x: np.sqrt(np.mean(x.astype(np.float64) ** 2))  # noqa: E731
    assert rms(wet) == pytest.approx(rms(speech), rel=1e-5)
    # The tail rings on into the pause (where the dry input is exactly 0): 25 to 75 ms after the sound
    # stops it is still within 20 dB of the sound.
    assert 20 * np.log10(rms(wet[2000:2800]) / rms(wet[:1600])) > -20.0
    assert np.corrcoef(wet, speech)[0, 1] < 0.9


def test_reverberation_scales_down_rather_than_exceed_full_scale():
    clicks = np.zeros(RATE // 4, np.float32)
    clicks[::400] = 1.0  # rms 0.05, peak 1: reverberation raises the rms-matched peak past 1
    wet = reverberate(clicks, synthetic_rir(RATE, 0.05, np.random.default_rng(0), direct_to_reverb_db=-10.0))
    assert np.max(np.abs(wet)) <= 1.0 + 1e-6


def test_reverberation_leaves_silence_unchanged():
    silence = np.zeros(100, np.float32)
    assert reverberate(silence, synthetic_rir(RATE, 0.1, np.random.default_rng(0))) is silence
