"""features.mfcc: MFCC-39 is 13 Kaldi MFCCs with deltas and delta-deltas at 100 Hz, T = (N - 400) // 160 + 1."""

from __future__ import annotations

import numpy as np
import pytest

from asr_pipeline.features.mfcc import MFCC_DIM, compute_mfcc39


@pytest.mark.parametrize(("samples", "frames"), [(16000, 98), (400, 1), (559, 1), (560, 2), (399, 0), (0, 0)])
def test_one_frame_per_10_ms_once_a_25_ms_window_fits(samples, frames):
    features = compute_mfcc39(np.zeros(samples, np.float32) + 0.01 * np.sin(np.arange(samples) * 0.3))

    # (16000 - 400) // 160 + 1 = 98; (559 - 400) // 160 + 1 = 1; (560 - 400) // 160 + 1 = 2; under 400: none
    assert features.shape == (frames, MFCC_DIM) and features.dtype == np.float32


def test_a_steady_tone_has_zero_deltas_away_from_the_edges_and_a_changing_one_does_not():
    t = np.arange(16000) / 16000
    steady = compute_mfcc39(0.3 * np.sin(2 * np.pi * 440 * t))
    gliding = compute_mfcc39(0.3 * np.sin(2 * np.pi * (200 + 1500 * t) * t))

    inner = slice(10, -10)  # compute_deltas pads by repeating the edge frames
    assert np.abs(steady[inner, 13:]).max() < 0.05 * np.abs(steady[inner, :13]).max()
    assert np.abs(gliding[inner, 13:26]).max() > 10 * np.abs(steady[inner, 13:26]).max()
