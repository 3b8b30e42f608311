"""Tiny test signals and the measurements the augmentation specs are written in (levels, SNR, pitch)."""

from __future__ import annotations

import numpy as np

RATE = 16000


def sine(freq_hz: float, seconds: float = 1.0, sample_rate: int = RATE, amplitude: float = 0.5) -> np.ndarray:
    t = np.arange(round(seconds * sample_rate)) / sample_rate
    return (amplitude * np.sin(2 * np.pi * freq_hz * t)).astype(np.float32)


def tone_mix(seconds: float = 1.0, sample_rate: int = RATE) -> np.ndarray:
    """440 + 1000 + 2500 Hz: inside every codec's and the telephone's passband."""
    return (
        sine(440, seconds, sample_rate, 0.2)
        + sine(1000, seconds, sample_rate, 0.2)
        + sine(2500, seconds, sample_rate, 0.1)
    )


def tone_level_db(waveform: np.ndarray, sample_rate: int, freq_hz: float) -> float:
    """The level of the ``freq_hz`` component (Hann-windowed spectrum peak within ±5 Hz), in dB."""
    spectrum = np.abs(np.fft.rfft(waveform * np.hanning(len(waveform))))
    frequencies = np.fft.rfftfreq(len(waveform), 1.0 / sample_rate)
    near = np.abs(frequencies - freq_hz) <= 5.0
    return float(20 * np.log10(spectrum[near].max() + 1e-20))


def peak_frequency(waveform: np.ndarray, sample_rate: int) -> float:
    """The strongest frequency, to a quarter of a bin (zero-padded 4×)."""
    size = 4 * len(waveform)
    spectrum = np.abs(np.fft.rfft(waveform * np.hanning(len(waveform)), size))
    return float(np.fft.rfftfreq(size, 1.0 / sample_rate)[np.argmax(spectrum)])


def snr_db(reference: np.ndarray, degraded: np.ndarray) -> float:
    """10·log10(P_reference / P_(degraded - reference)), powers in float64."""
    reference = reference.astype(np.float64)
    error = degraded.astype(np.float64) - reference
    return float(10 * np.log10(np.mean(reference**2) / np.mean(error**2)))
