"""The w2v-BERT 2.0 frontend: 160-dim stacked, per-utterance normalized Kaldi log-mel features.

What ``transformers.SeamlessM4TFeatureExtractor`` feeds ``Wav2Vec2BertModel``, computed with our own
vectorized Kaldi filterbank (features/fbank.py) instead of its per-frame NumPy loop:

1. 80 Kaldi log-mel energies per 25 ms frame every 10 ms on int16-scaled 16 kHz audio: DC offset removed,
   pre-emphasis 0.97, povey window, 512-point FFT, power spectrum, mel triangles in Kaldi's mel scale
   from 20 Hz to 8 kHz, floor 1.19e-7 (float32 epsilon), natural log. (Exactly Kaldi's fbank defaults.)
2. Each mel bin normalized over the utterance's frames: (x - mean) / sqrt(var + 1e-7), the variance with
   ddof=1 (the extractor computes it that way on purpose, to match torch's default).
3. Pairs of consecutive frames concatenated (stride 2): frame 2k's 80 values, then frame 2k+1's.
   An odd last frame is dropped. The extractor pads it to an even count with a zero frame instead, but
   masks that stacked frame out of the attention mask, so the model sees exactly these T // 2 frames.
   The normalization statistics still include the dropped frame, as the extractor's do.

Computed in float64, as the extractor's spectrogram is, so the result matches it to ~1e-5 on speech
(tests/features/test_w2v_bert.py checks 1e-3 on espeak-ng speech of several lengths); float32 would not:
bins 100 dB below a frame's peak are rounding noise in a float32 FFT.
"""

from __future__ import annotations

import numpy as np

from asr_pipeline.features.fbank_options import FbankOptions

SAMPLE_RATE = 16000  # the pretrained model's rate; the frontend's options are fixed by the checkpoint
NUM_MEL_BINS = 80
STRIDE = 2
FEATURE_DIM = NUM_MEL_BINS * STRIDE  # 160
VARIANCE_EPSILON = 1e-7
MEL_OPTIONS = FbankOptions(num_mel_bins=NUM_MEL_BINS, sample_rate=SAMPLE_RATE)


def compute_w2v_bert_features(waveform: np.ndarray) -> np.ndarray:
    """(N,) float waveform in [-1, 1] at 16 kHz -> (T // 2, 160) float32, T = 1 + (N - 400) // 160.

    Fewer than two frames (N < 560 samples, 35 ms) give (0, 160): one frame has no variance.
    """
    import torch  # here, not above: the frontend registry reads this module's constants without torch

    from asr_pipeline.features.fbank import INT16_SCALE, log_mel_spectrogram

    samples = torch.from_numpy(np.asarray(waveform, dtype=np.float64)) * INT16_SCALE  # (N,)
    log_mel = log_mel_spectrogram(samples, MEL_OPTIONS)  # (T, 80) float64
    num_frames = log_mel.shape[0]
    if num_frames < STRIDE:
        return np.zeros((0, FEATURE_DIM), dtype=np.float32)
    variance, mean = torch.var_mean(log_mel, dim=0, correction=1, keepdim=True)  # (1, 80) each
    normalized = (log_mel - mean) / torch.sqrt(variance + VARIANCE_EPSILON)  # (T, 80)
    kept = num_frames - num_frames % STRIDE
    stacked = normalized[:kept].reshape(kept // STRIDE, FEATURE_DIM)  # (T // 2, 160), row-major pairs
    return stacked.to(torch.float32).numpy()
