"""Kaldi-compatible log-mel filterbank features (torchaudio.compliance.kaldi)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torchaudio.compliance import kaldi

from asr_pipeline.options import options_from_dict

# Kaldi computes on int16-scaled samples; scaling keeps the log energies identical to Kaldi's own.
INT16_SCALE = 32768.0


@dataclass(frozen=True)
class FbankOptions:
    num_mel_bins: int = 80
    sample_rate: int = 16000
    frame_length_ms: float = 25.0
    frame_shift_ms: float = 10.0
    dither: float = 0.0  # 0 keeps extraction deterministic, so shards are byte-identical across runs

    @classmethod
    def from_dict(cls, values: dict | None) -> FbankOptions:
        return options_from_dict(cls, values, "params.yaml features.fbank")


def compute_fbank(waveform: np.ndarray, options: FbankOptions = FbankOptions()) -> np.ndarray:
    """(N,) float waveform in [-1, 1] at ``options.sample_rate`` -> (T, num_mel_bins) float32.

    T = 1 + (N - frame_length) // frame_shift (Kaldi's snip_edges=True); (0, F) if N < frame_length.
    """
    frame_length = int(options.sample_rate * options.frame_length_ms / 1000)
    if waveform.shape[0] < frame_length:
        return np.zeros((0, options.num_mel_bins), dtype=np.float32)
    samples = torch.from_numpy(np.ascontiguousarray(waveform, dtype=np.float32)).unsqueeze(0) * INT16_SCALE
    features = kaldi.fbank(
        samples,
        num_mel_bins=options.num_mel_bins,
        sample_frequency=options.sample_rate,
        frame_length=options.frame_length_ms,
        frame_shift=options.frame_shift_ms,
        dither=options.dither,
        energy_floor=0.0,
    )
    return features.numpy().astype(np.float32, copy=False)  # (T, F)
