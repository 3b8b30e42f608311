import numpy as np
import torch
from torchaudio.compliance import kaldi

from asr_pipeline.features.fbank import compute_fbank
from asr_pipeline.features.fbank_options import FbankOptions


def test_frame_count_follows_kaldi_snip_edges():
    # 1 s at 16 kHz: 1 + (16000 - 400) // 160 = 98 frames of 80 bins
    features = compute_fbank(np.random.default_rng(0).uniform(-0.5, 0.5, 16000).astype(np.float32))
    assert features.shape == (98, 80)
    assert features.dtype == np.float32


def test_matches_kaldi_on_int16_scaled_samples():
    waveform = np.random.default_rng(1).uniform(-0.5, 0.5, 8000).astype(np.float32)
    expected = kaldi.fbank(
        torch.from_numpy(waveform)[None] * 32768, num_mel_bins=80, dither=0.0, energy_floor=0.0
    )
    np.testing.assert_allclose(compute_fbank(waveform), expected.numpy(), rtol=1e-5, atol=1e-4)


def test_shorter_than_one_frame_gives_zero_frames():
    assert compute_fbank(np.zeros(100, dtype=np.float32), FbankOptions()).shape == (0, 80)


def test_matches_kaldi_on_speech_in_every_bin():
    """Even bins 100 dB below their frame's peak, where the power is float32 FFT rounding noise, agree:
    the window and mel filters are built in float32 as torchaudio builds them (measured max 2e-6)."""
    from asr_pipeline.demo.synthesis import Voice, synthesize
    from asr_pipeline.io.audio import load_audio

    waveform = load_audio(synthesize("seven green birds sing in the morning", Voice("en-us", "m3", 160, 50)))
    expected = kaldi.fbank(
        torch.from_numpy(waveform)[None] * 32768, num_mel_bins=80, dither=0.0, energy_floor=0.0
    ).numpy()

    ours = compute_fbank(waveform)

    assert ours.shape == expected.shape == (1 + (waveform.shape[0] - 400) // 160, 80)
    np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-4)
