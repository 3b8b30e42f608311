import numpy as np
import pytest
import torch
import torchaudio.functional as AF

from asr_pipeline.io.resample import PolyphaseResampler


@pytest.mark.parametrize(
    ("orig_rate", "new_rate"), [(22050, 16000), (44100, 16000), (48000, 16000), (8000, 16000), (16000, 22050)]
)
@pytest.mark.parametrize("length", [1, 441, 997, 22050, 48001])  # primes and block-size edges
def test_matches_torchaudio_resample_sample_for_sample(orig_rate, new_rate, length):
    waveform = torch.from_numpy(np.random.default_rng(length).uniform(-1, 1, length).astype(np.float32))
    expected = AF.resample(waveform, orig_rate, new_rate)

    resampled = PolyphaseResampler(orig_rate, new_rate)(waveform)

    # torchaudio rounds ceil(length * new / orig) through float32 and may keep one sample more
    exact_length = -(-length * new_rate // orig_rate)
    assert resampled.shape == (exact_length,) and expected.shape[0] - exact_length in (0, 1)
    # Same kernel values (torchaudio's), summed in another order: float32 rounding only.
    torch.testing.assert_close(resampled, expected[:exact_length], rtol=0, atol=2e-5)


def test_each_phase_group_keeps_only_its_nonzero_taps():
    resampler = PolyphaseResampler(22050, 16000)  # 441 -> 320 per block, 459-tap filters

    spans = [weights.shape[0] for _, weights in resampler.groups]

    assert len(spans) == 16 and max(spans) < 50  # 20 neighbouring phases cover ~43 inputs, not 459
