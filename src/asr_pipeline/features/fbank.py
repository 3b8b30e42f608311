"""Kaldi-compatible log-mel filterbank features, computed in one vectorized pass per utterance.

The same numbers as ``torchaudio.compliance.kaldi.fbank`` with Kaldi's defaults (snip_edges, DC offset
removed per frame, pre-emphasis 0.97, povey window, FFT size the next power of two, power spectrum, mel
triangles in mel space from 20 Hz to Nyquist, log floored at float32 epsilon), to within 2e-6 on
int16-scaled speech (tests/features/test_fbank.py checks against torchaudio).

Why not call ``kaldi.fbank``: it rebuilds the window and the mel matrix on every call and squares the
complex magnitude through ``abs``. Measured on 100 espeak-ng utterances (559 s of audio, one thread):
``kaldi.fbank`` 0.147 s, this module 0.081 s; the mel matrix is cached here and the power is re^2 + im^2.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
from torch import Tensor
from torchaudio.compliance import kaldi

from asr_pipeline.features.fbank_options import FbankOptions

# Kaldi computes on int16-scaled samples; scaling keeps the log energies identical to Kaldi's own.
INT16_SCALE = 32768.0
PREEMPHASIS = 0.97  # Kaldi's --preemphasis-coefficient default
POVEY_EXPONENT = 0.85  # Kaldi's "povey" window: a Hann window raised to 0.85
LOW_FREQ_HZ = 20.0  # Kaldi's --low-freq default; the high edge is Nyquist (--high-freq 0)
# Kaldi floors mel energies at float32 epsilon before the log, whatever the compute dtype.
LOG_FLOOR = float(torch.finfo(torch.float32).eps)


def compute_fbank(waveform: np.ndarray, options: FbankOptions = FbankOptions()) -> np.ndarray:
    """(N,) float waveform in [-1, 1] at ``options.sample_rate`` -> (T, num_mel_bins) float32.

    T = 1 + (N - frame_length) // frame_shift (Kaldi's snip_edges=True); (0, F) if N < frame_length.
    """
    samples = torch.from_numpy(np.ascontiguousarray(waveform, dtype=np.float32)) * INT16_SCALE
    return log_mel_spectrogram(samples, options).numpy()


def log_mel_spectrogram(samples: Tensor, options: FbankOptions) -> Tensor:
    """(N,) int16-scaled samples -> (T, num_mel_bins) Kaldi log-mel energies in ``samples.dtype``."""
    frame_length, frame_shift = options.frame_length, options.frame_shift
    if samples.shape[0] < frame_length:
        return samples.new_zeros((0, options.num_mel_bins))
    frames = samples.unfold(0, frame_length, frame_shift)  # (T, L), a view: frame t starts at t * shift
    frames = frames - frames.mean(dim=1, keepdim=True)  # Kaldi's remove_dc_offset
    # Kaldi pre-emphasis treats the sample before a frame's first as the first itself: x0 * (1 - 0.97).
    emphasized = torch.cat(
        [frames[:, :1] * (1.0 - PREEMPHASIS), frames[:, 1:] - PREEMPHASIS * frames[:, :-1]], dim=1
    )  # (T, L)
    window = _povey_window(frame_length, samples.dtype)  # (L,)
    spectrum = torch.fft.rfft(emphasized * window, n=options.fft_size)  # (T, K) with K = fft_size/2 + 1
    power = spectrum.real.square() + spectrum.imag.square()  # (T, K); 1.6x faster than abs().pow(2)
    mel = power @ _mel_banks(options.num_mel_bins, options.fft_size, options.sample_rate, samples.dtype)
    return mel.clamp_min(LOG_FLOOR).log()  # (T, F)


@functools.lru_cache(maxsize=8)
def _povey_window(length: int, dtype: torch.dtype) -> Tensor:
    # Computed in the compute dtype, as torchaudio (float32) and the SeamlessM4T extractor (float64) do:
    # the window's rounding sets the leakage floor of quiet bins next to loud harmonics. A float64 window
    # cast to float32 moved log energies against torchaudio by up to 8e-4 within 60 dB of a frame's peak
    # and 0.035 in bins 100+ dB below it (espeak-ng speech).
    return torch.hann_window(length, periodic=False, dtype=dtype).pow(POVEY_EXPONENT)


@functools.lru_cache(maxsize=8)
def _mel_banks(num_mel_bins: int, fft_size: int, sample_rate: int, dtype: torch.dtype) -> Tensor:
    """(fft_size/2 + 1, num_mel_bins) Kaldi mel triangles; the Nyquist bin's weight is 0, as in Kaldi.

    Built at the precision each reference builds them: torchaudio's Kaldi in float32 (we call its
    ``get_mel_banks``), the SeamlessM4T extractor in float64 (built here). Filters built in float64 and
    cast differ in the last bits near triangle edges; on espeak-ng speech that moved log energies by up to
    3e-4 against torchaudio, against 2e-6 (float rounding) with its own float32 filters.
    """
    if dtype == torch.float32:
        # high_freq 0 (Nyquist); VTLN bounds 100 and -500 Hz with warp 1.0 (none): Kaldi's defaults.
        banks, _ = kaldi.get_mel_banks(
            num_mel_bins, fft_size, float(sample_rate), LOW_FREQ_HZ, 0.0, 100.0, -500.0, 1.0
        )  # (F, K - 1)
        return torch.nn.functional.pad(banks, (0, 1)).T.contiguous()  # (K, F): add the Nyquist bin

    def mel(hz: Tensor) -> Tensor:
        return 1127.0 * torch.log1p(hz / 700.0)  # Kaldi's mel scale

    edges = torch.linspace(
        float(mel(torch.tensor(LOW_FREQ_HZ, dtype=torch.float64))),
        float(mel(torch.tensor(sample_rate / 2, dtype=torch.float64))),
        num_mel_bins + 2,
        dtype=torch.float64,
    )  # (F + 2,): left edge, F centres, right edge
    left, center, right = edges[:-2], edges[1:-1], edges[2:]  # (F,) each
    bin_mels = mel(torch.arange(fft_size // 2 + 1, dtype=torch.float64) * (sample_rate / fft_size))[:, None]
    rising = (bin_mels - left) / (center - left)  # (K, F)
    falling = (right - bin_mels) / (right - center)  # (K, F)
    return torch.minimum(rising, falling).clamp_min(0.0).to(dtype).contiguous()  # (K, F)
