"""augment._resample: numpy in, numpy out at the new rate; equal rates pass the waveform through."""

from __future__ import annotations

import numpy as np

from asr_pipeline.augment._resample import resample


def test_equal_rates_return_the_waveform_itself():
    waveform = np.ones(10, np.float32)

    assert resample(waveform, 16000, 16000) is waveform


def test_the_length_follows_the_rate_and_a_tone_keeps_its_frequency():
    t = np.arange(16000) / 16000
    tone = np.sin(2 * np.pi * 440 * t).astype(np.float32)

    down = resample(tone, 16000, 8000)
    up = resample(tone[:1001], 16000, 22050)

    assert down.dtype == np.float32 and down.shape == (8000,)
    assert up.shape == (int(np.ceil(1001 * 22050 / 16000)),)  # 1380
    spectrum = np.abs(np.fft.rfft(down))
    assert np.argmax(spectrum) == 440  # 1 s at 8 kHz: bin k is k Hz
