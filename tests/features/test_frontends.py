import numpy as np
import pytest

from asr_pipeline.features.fbank import FbankOptions
from asr_pipeline.features.frontends import ARCHITECTURES, frontend_for


@pytest.mark.parametrize("architecture", ["squeezeformer", "zipformer", "paraformer"])
def test_conformer_family_architectures_get_kaldi_fbank_of_num_mel_bins(architecture):
    frontend = frontend_for(architecture, FbankOptions(num_mel_bins=64))
    features = frontend(np.random.default_rng(0).uniform(-0.5, 0.5, 16000))

    assert (frontend.kind, frontend.feature_dim, frontend.frame_shift_ms) == ("fbank", 64, 10.0)
    assert features.shape == (98, 64)  # 1 + (16000 - 400) // 160 frames


def test_w2v_bert_gets_160_dim_stacked_frames_of_20_ms_at_16_khz():
    frontend = frontend_for("w2v-bert", FbankOptions(num_mel_bins=64, sample_rate=8000))  # fbank ignored
    features = frontend(np.random.default_rng(0).uniform(-0.5, 0.5, 16000))

    assert (frontend.feature_dim, frontend.sample_rate, frontend.frame_shift_ms) == (160, 16000, 20.0)
    assert features.shape == (49, 160) and features.dtype == np.float32  # 98 Kaldi frames stacked by 2


def test_an_unknown_architecture_is_rejected_listing_the_known_ones():
    with pytest.raises(ValueError, match="unknown architecture 'conformer'; expected one of squeezeformer"):
        frontend_for("conformer")
    assert "w2v-bert" in ARCHITECTURES


@pytest.mark.parametrize("architecture", ["hubert", "hubert-pretrain"])
def test_hubert_gets_its_waveform_in_rows_of_320_samples(architecture):
    frontend = frontend_for(architecture)
    waveform = np.random.default_rng(0).uniform(-0.5, 0.5, 16100).astype(np.float32)
    frames = frontend(waveform)

    assert (frontend.feature_dim, frontend.sample_rate, frontend.frame_shift_ms) == (320, 16000, 20.0)
    assert frames.shape == (51, 320)  # ceil(16100 / 320): the last row zero-padded
    assert np.array_equal(frames.reshape(-1)[:16100], waveform) and not frames.reshape(-1)[16100:].any()


def test_mfcc_39_is_kaldi_mfcc_with_deltas_and_delta_deltas():
    import torch
    import torchaudio
    from torchaudio.compliance import kaldi

    from asr_pipeline.features.frontends import frontend_named

    waveform = np.random.default_rng(0).uniform(-0.5, 0.5, 16000).astype(np.float32)
    features = frontend_named("mfcc")(waveform)
    mfcc = kaldi.mfcc(torch.from_numpy(waveform)[None], use_energy=False).T  # (13, T)
    deltas = torchaudio.functional.compute_deltas(mfcc)

    assert features.shape == (98, 39) and features.dtype == np.float32
    np.testing.assert_allclose(features[:, :13], mfcc.T.numpy(), atol=1e-5)
    np.testing.assert_allclose(features[:, 13:26], deltas.T.numpy(), atol=1e-5)
    assert frontend_named("mfcc")(waveform[:399]).shape == (0, 39)  # shorter than one window
