"""MFCC-39: 13 Kaldi MFCCs + deltas + delta-deltas at 100 Hz, the targets of HuBERT's first iteration
(fairseq's ``dump_mfcc_feature.py`` and minimal_hubert compute exactly this) and the pronunciation aligner's
classic frontend.

``torchaudio.compliance.kaldi.mfcc`` with Kaldi's defaults (23 mel bins, 25 ms windows every 10 ms,
snip_edges, no energy term, no dither) on the [-1, 1] samples, then ``torchaudio.functional.compute_deltas``
(window 5) twice: 16000 samples give (98, 39).
"""

from __future__ import annotations

import numpy as np

MFCC_DIM, MFCC_RATE = 39, 16000
MFCC_SHIFT_MS = 10.0
MIN_SAMPLES = 400  # one 25 ms window at 16 kHz


def compute_mfcc39(waveform: np.ndarray) -> np.ndarray:
    """(N,) float samples at 16 kHz -> (T, 39) float32, T = (N - 400) // 160 + 1 (0 below one window)."""
    if len(waveform) < MIN_SAMPLES:
        return np.zeros((0, MFCC_DIM), dtype=np.float32)
    import torch  # here, not above: the frontend registry reads this module's constants without torch
    import torchaudio
    from torchaudio.compliance import kaldi

    samples = torch.from_numpy(np.ascontiguousarray(waveform, dtype=np.float32))[None]  # (1, N)
    mfcc = kaldi.mfcc(samples, sample_frequency=MFCC_RATE, use_energy=False, dither=0.0).T  # (13, T)
    deltas = torchaudio.functional.compute_deltas(mfcc)
    features = torch.cat([mfcc, deltas, torchaudio.functional.compute_deltas(deltas)]).T  # (T, 39)
    return features.contiguous().numpy()


__all__ = ["MFCC_DIM", "MFCC_RATE", "MFCC_SHIFT_MS", "compute_mfcc39"]
