import numpy as np
import pytest

from asr_pipeline.features.fbank_options import FbankOptions
from asr_pipeline.features.frontends import FRONTENDS, frontend_named


def test_fbank_is_kaldi_fbank_of_num_mel_bins():
    frontend = frontend_named("fbank", FbankOptions(num_mel_bins=64))
    features = frontend(np.random.default_rng(0).uniform(-0.5, 0.5, 16000))

    assert (frontend.kind, frontend.feature_dim, frontend.frame_shift_ms) == ("fbank", 64, 10.0)
    assert features.shape == (98, 64)  # 1 + (16000 - 400) // 160 frames


def test_w2v_bert_gets_160_dim_stacked_frames_of_20_ms_at_16_khz():
    frontend = frontend_named("w2v-bert", FbankOptions(num_mel_bins=64, sample_rate=8000))  # fbank ignored
    features = frontend(np.random.default_rng(0).uniform(-0.5, 0.5, 16000))

    assert (frontend.feature_dim, frontend.sample_rate, frontend.frame_shift_ms) == (160, 16000, 20.0)
    assert features.shape == (49, 160) and features.dtype == np.float32  # 98 Kaldi frames stacked by 2


def test_an_unknown_frontend_is_rejected_listing_the_known_ones():
    with pytest.raises(
        ValueError, match="unknown frontend 'spectrogram'; expected one of fbank, w2v-bert, waveform, mfcc"
    ):
        frontend_named("spectrogram")


@pytest.mark.parametrize("name", ["fbank", "w2v-bert", "waveform", "mfcc"])
def test_each_registered_frontend_makes_what_its_entry_states(name):
    frontend = frontend_named(name)
    features = frontend(np.random.default_rng(0).uniform(-0.5, 0.5, 16000).astype(np.float32))

    assert frontend.entry is FRONTENDS[name]
    assert features.ndim == 2 and features.shape[1] == frontend.feature_dim and features.dtype == np.float32
    assert frontend.sample_rate == 16000 and frontend.frame_shift_ms in (10.0, 20.0)


def test_the_waveform_frontend_gives_the_samples_in_rows_of_320():
    frontend = frontend_named("waveform")
    waveform = np.random.default_rng(0).uniform(-0.5, 0.5, 16100).astype(np.float32)
    frames = frontend(waveform)

    assert (frontend.feature_dim, frontend.sample_rate, frontend.frame_shift_ms) == (320, 16000, 20.0)
    assert frames.shape == (51, 320)  # ceil(16100 / 320): the last row zero-padded
    assert np.array_equal(frames.reshape(-1)[:16100], waveform) and not frames.reshape(-1)[16100:].any()


def test_mfcc_39_is_kaldi_mfcc_with_deltas_and_delta_deltas():
    import torch
    import torchaudio
    from torchaudio.compliance import kaldi

    waveform = np.random.default_rng(0).uniform(-0.5, 0.5, 16000).astype(np.float32)
    features = frontend_named("mfcc")(waveform)
    mfcc = kaldi.mfcc(torch.from_numpy(waveform)[None], use_energy=False).T  # (13, T)
    deltas = torchaudio.functional.compute_deltas(mfcc)

    assert features.shape == (98, 39) and features.dtype == np.float32
    np.testing.assert_allclose(features[:, :13], mfcc.T.numpy(), atol=1e-5)
    np.testing.assert_allclose(features[:, 13:26], deltas.T.numpy(), atol=1e-5)
    assert frontend_named("mfcc")(waveform[:399]).shape == (0, 39)  # shorter than one window
