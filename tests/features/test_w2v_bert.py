"""The w2v-BERT frontend against transformers' SeamlessM4TFeatureExtractor on espeak-ng speech.

Tolerance 1e-3 (the issue's bound). The extractor rounds its float64 log-mel energies to float32 before
normalizing each bin by its standard deviation, so its own error is float32 rounding / std: measured
<= 7e-6 on clips of three or more frames of speech, 3.5e-4 on a two-frame clip of near-silence (std 0.003).
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from asr_pipeline.demo.synthesis import Voice, synthesize
from asr_pipeline.features.w2v_bert import FEATURE_DIM, compute_w2v_bert_features
from asr_pipeline.io.audio import load_audio

transformers = pytest.importorskip("transformers")

FRAME, SHIFT = 400, 160  # samples at 16 kHz
TOLERANCE = 1e-3


def samples_for_frames(num_frames: int) -> int:
    return FRAME + (num_frames - 1) * SHIFT  # the fewest samples giving num_frames Kaldi frames


@pytest.fixture(scope="module")
def speech() -> list[np.ndarray]:
    """Two espeak-ng utterances (22.05 kHz), resampled to 16 kHz as the pipeline does."""
    rng = random.Random(0)
    voices = [Voice("en-us", "m3", rng.randint(140, 180), 50), Voice("en-gb", "f2", 160, 60)]
    texts = ["the quick brown fox jumps over the lazy dog", "she reads a long book every night"]
    return [load_audio(synthesize(text, voice), 16000) for text, voice in zip(texts, voices, strict=True)]


@pytest.fixture(scope="module")
def extractor():
    return transformers.SeamlessM4TFeatureExtractor()


def reference(extractor, waveform: np.ndarray) -> np.ndarray:
    """What Wav2Vec2BertModel sees with the extractor's defaults: the frames its attention mask keeps."""
    out = extractor(waveform, sampling_rate=16000, return_tensors="np")
    return out["input_features"][0][out["attention_mask"][0].astype(bool)]


@pytest.mark.parametrize(
    "num_frames",
    [None, 3, 98, 99, 250, 251],  # None: the whole utterance; odd counts drop (mask out) their last frame
)
def test_matches_seamless_m4t_feature_extractor_on_speech(speech, extractor, num_frames):
    for waveform in speech:
        start = 4000  # 0.25 s in: the clip holds speech, not only the leading silence
        clip = waveform if num_frames is None else waveform[start : start + samples_for_frames(num_frames)]
        expected = reference(extractor, clip)

        ours = compute_w2v_bert_features(clip)

        assert ours.shape == expected.shape and ours.dtype == np.float32
        np.testing.assert_allclose(ours, expected, rtol=0, atol=TOLERANCE)


def test_shape_is_half_the_kaldi_frames_by_160():
    # 1.0 s: 1 + (16000 - 400) // 160 = 98 frames -> 49 stacked; 1.01 s: 99 frames -> 49 (odd one dropped)
    rng = np.random.default_rng(0)
    assert compute_w2v_bert_features(rng.uniform(-0.5, 0.5, 16000)).shape == (49, FEATURE_DIM)
    assert compute_w2v_bert_features(rng.uniform(-0.5, 0.5, samples_for_frames(99))).shape == (49, 160)


def test_fewer_than_two_frames_give_no_features():
    assert compute_w2v_bert_features(np.full(samples_for_frames(1), 0.1)).shape == (0, FEATURE_DIM)


def test_stacking_puts_frame_2k_then_frame_2k_plus_1_in_row_k(speech):
    clip = speech[0][4000 : 4000 + samples_for_frames(10)]
    unstacked = transformers.SeamlessM4TFeatureExtractor(stride=1)(clip, sampling_rate=16000)  # (1, 10, 80)
    ours = compute_w2v_bert_features(clip)  # (5, 160)

    np.testing.assert_allclose(ours[2, :80], unstacked["input_features"][0, 4], atol=TOLERANCE)
    np.testing.assert_allclose(ours[2, 80:], unstacked["input_features"][0, 5], atol=TOLERANCE)
