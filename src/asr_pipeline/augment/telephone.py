"""Telephone channel: narrowband 8 kHz, the 300–3400 Hz voice band, G.711 μ-law, back at the original rate.

The band is ITU-T G.712's (the transmission mask of a PCM telephone channel) and the companding G.711's;
simulating the channel this way to train or test on narrowband speech goes back at least to the NTIMIT
corpus (Jankowski et al., 1990), TIMIT played through real telephone lines.

The band-pass is a cascade of biquads (two high-pass, two low-pass, with the Q values that make each
pair a 4th-order Butterworth, 24 dB per octave), not an FFT mask. A real line is a causal filter with
gentle slopes and phase distortion, which the model should learn to ignore, while a brick-wall FFT mask
over a whole utterance rings before every onset, which no telephone does. 4th order puts a 100 Hz hum
38 dB down; the low-pass at 3400 Hz matters less, as the resampling to 8 kHz has already removed
everything above 4 kHz.

μ-law here is the continuous μ = 255 law quantized to 8 bits (torchaudio's), not G.711's piecewise-
linear segment approximation of the same curve: close enough for augmentation, and exact G.711 codes
matter to no acoustic model.
"""

from __future__ import annotations

import numpy as np

from asr_pipeline.augment._resample import resample

TELEPHONE_RATE = 8000
# Q of the two biquads of a 4th-order Butterworth: 1 / (2 cos(π/8)) and 1 / (2 cos(3π/8)).
BUTTERWORTH_4_Q = (0.5412, 1.3066)
MU_LAW_CHANNELS = 256  # 8 bits, as G.711


def telephone_band(
    waveform: np.ndarray,
    sample_rate: int,
    low_hz: float = 300.0,
    high_hz: float = 3400.0,
    mu_law: bool = True,
) -> np.ndarray:
    """``waveform`` (N,) as heard through a telephone line: (N,) float32 at ``sample_rate`` again.

    Resamples to 8 kHz, band-passes ``low_hz``–``high_hz``, μ-law quantizes to 8 bits when ``mu_law``,
    and resamples back, so the frontend sees its usual rate with nothing above ``high_hz``. Samples
    beyond [-1, 1] are clipped, as the channel's 8-bit codes would.
    """
    nyquist = TELEPHONE_RATE / 2
    if not 0 < low_hz < high_hz < nyquist:
        raise ValueError(
            f"the telephone band must satisfy 0 < low_hz < high_hz < {nyquist:g} Hz (8 kHz channel), got "
            f"low_hz={low_hz!r}, high_hz={high_hz!r}"
        )
    if waveform.size == 0:
        return waveform
    import torch
    import torchaudio.functional as F

    narrow = torch.from_numpy(resample(waveform, sample_rate, TELEPHONE_RATE).copy())  # (M,)
    # lfilter clamps its output to [-1, 1] (torchaudio's default), the clipping a real channel has too.
    for q in BUTTERWORTH_4_Q:
        narrow = F.highpass_biquad(narrow, TELEPHONE_RATE, low_hz, Q=q)
    for q in BUTTERWORTH_4_Q:
        narrow = F.lowpass_biquad(narrow, TELEPHONE_RATE, high_hz, Q=q)
    if mu_law:
        codes = F.mu_law_encoding(narrow.clamp(-1.0, 1.0), MU_LAW_CHANNELS)
        narrow = F.mu_law_decoding(codes, MU_LAW_CHANNELS)
    wide = resample(narrow.numpy().astype(np.float32), TELEPHONE_RATE, sample_rate)
    # Down and up again gives ceil(ceil(N·8000/rate)·rate/8000) >= N samples: cut back to N.
    return np.ascontiguousarray(wide[: len(waveform)], dtype=np.float32)
