"""Tiny real audio files for reader and decoder tests, written with libsndfile in any format it writes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile

FORMATS = {".wav": "WAV", ".flac": "FLAC", ".sph": "NIST", ".ogg": "OGG"}


def write_audio(path: Path, seconds: float = 0.25, sample_rate: int = 16000, channels: int = 1) -> Path:
    """A 440 Hz tone at 0.3 full scale, 16-bit, in the format the suffix names; returns ``path``."""
    t = np.arange(round(seconds * sample_rate)) / sample_rate
    tone = 0.3 * np.sin(2 * np.pi * 440.0 * t)
    path.parent.mkdir(parents=True, exist_ok=True)
    soundfile.write(
        path, np.repeat(tone[:, None], channels, axis=1), sample_rate, format=FORMATS[path.suffix]
    )
    return path


def write_ramp(path: Path, sample_rate: int = 16000, seconds: float = 2.0) -> np.ndarray:
    """Samples that say where they are (a slow ramp from -0.5 to 0.5), 16-bit; returns them as decoded."""
    samples = np.linspace(-0.5, 0.5, round(seconds * sample_rate), dtype=np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    soundfile.write(path, samples, sample_rate, format=FORMATS[path.suffix], subtype="PCM_16")
    return soundfile.read(path, dtype="float32")[0]
