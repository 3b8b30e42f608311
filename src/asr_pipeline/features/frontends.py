"""Which features a model eats: one registry entry per frontend (``FRONTENDS``), each stating its sample
rate, feature width, frame shift, Kaldi framing (window, shift, frames stacked into one) and extractor. An
architecture's spec names its frontend (``models.registry.frontend_of``); nothing else branches on a
frontend's name: it asks the entry.

    frontend   F (per frame)  frame shift
    fbank      num_mel_bins   10 ms   (features/fbank.py)      squeezeformer, zipformer, paraformer
    w2v-bert   160            20 ms   (features/w2v_bert.py)   w2v-bert
    waveform   320            20 ms   the 16 kHz samples, 320 per frame   hubert, hubert-pretrain
    mfcc       39             10 ms   (features/mfcc.py)       speech-aligner; HuBERT's first targets

A ``Frontend`` (an entry's name and the fbank options) is a small frozen value: picklable, so worker
processes get it with their rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from asr_pipeline.features import mfcc, w2v_bert
from asr_pipeline.features.fbank_options import FbankOptions

WAVEFORM_RATE, WAVEFORM_FRAME = 16000, 320  # HuBERT's input rate and its conv stack's stride (20 ms)


@dataclass(frozen=True)
class FrontendEntry:
    """One frontend. Each callable takes the run's ``FbankOptions`` (params.yaml ``features.fbank``), which a
    frontend with settings fixed elsewhere (w2v-bert's checkpoint, MFCC-39) ignores."""

    name: str
    description: str  # for --help: what the features are
    sample_rate: Callable[[FbankOptions], int]  # the rate the waveform is resampled to
    feature_dim: Callable[[FbankOptions], int]  # F
    frame_shift_ms: Callable[[FbankOptions], float]  # audio time per output frame
    extract: Callable[[np.ndarray, FbankOptions], np.ndarray]  # (N,) in [-1, 1] -> (T, F) float32
    # The Kaldi framing batches are planned with (data.audio_dataset.PlannedFrontend): window and shift
    # from these options, ``stack`` Kaldi frames per output frame (w2v-bert stacks pairs).
    frame_options: Callable[[FbankOptions], FbankOptions] = lambda fbank: fbank
    stack: int = 1
    # Whether F is the fbank options' num_mel_bins (so a run trained at another width is featurized with
    # that many bins: decoding.transcribe.run_frontend).
    width_is_mel_bins: bool = False


def _compute_fbank(waveform: np.ndarray, fbank: FbankOptions) -> np.ndarray:
    from asr_pipeline.features.fbank import compute_fbank  # torch: imported when features are computed

    return compute_fbank(waveform, fbank)


FRONTENDS: dict[str, FrontendEntry] = {
    entry.name: entry
    for entry in (
        FrontendEntry(
            name="fbank",
            description="fbank-80 (Kaldi log-mel, num_mel_bins wide)",
            sample_rate=lambda fbank: fbank.sample_rate,
            feature_dim=lambda fbank: fbank.num_mel_bins,
            frame_shift_ms=lambda fbank: fbank.frame_shift_ms,
            extract=_compute_fbank,
            width_is_mel_bins=True,
        ),
        FrontendEntry(
            name="w2v-bert",
            description="160-dim stacked normalized fbank (SeamlessM4TFeatureExtractor's)",
            sample_rate=lambda fbank: w2v_bert.SAMPLE_RATE,
            feature_dim=lambda fbank: w2v_bert.FEATURE_DIM,
            frame_shift_ms=lambda fbank: w2v_bert.STRIDE * w2v_bert.MEL_OPTIONS.frame_shift_ms,
            extract=lambda waveform, fbank: w2v_bert.compute_w2v_bert_features(waveform),
            frame_options=lambda fbank: w2v_bert.MEL_OPTIONS,
            stack=w2v_bert.STRIDE,
        ),
        FrontendEntry(
            name="waveform",
            description="the 16 kHz samples in 320-sample rows",
            sample_rate=lambda fbank: WAVEFORM_RATE,
            feature_dim=lambda fbank: WAVEFORM_FRAME,
            frame_shift_ms=lambda fbank: 1000.0 * WAVEFORM_FRAME / WAVEFORM_RATE,
            extract=lambda waveform, fbank: waveform_frames(waveform),
        ),
        FrontendEntry(
            name="mfcc",
            description="39-dim MFCC with deltas",
            sample_rate=lambda fbank: mfcc.MFCC_RATE,
            feature_dim=lambda fbank: mfcc.MFCC_DIM,
            frame_shift_ms=lambda fbank: mfcc.MFCC_SHIFT_MS,
            extract=lambda waveform, fbank: mfcc.compute_mfcc39(waveform),
        ),
    )
}
FRONTEND_KINDS = tuple(FRONTENDS)


@dataclass(frozen=True)
class Frontend:
    """Waveform -> (T, F) float32 features: the ``FRONTENDS`` entry ``kind`` with ``fbank`` options."""

    kind: str
    fbank: FbankOptions  # used by the fbank kind; w2v-bert's settings are fixed by its checkpoint

    @property
    def entry(self) -> FrontendEntry:
        return FRONTENDS[self.kind]

    @property
    def sample_rate(self) -> int:
        return self.entry.sample_rate(self.fbank)

    @property
    def feature_dim(self) -> int:
        return self.entry.feature_dim(self.fbank)

    @property
    def frame_shift_ms(self) -> float:
        """Audio time per output frame: w2v-bert stacks two 10 ms frames into one; a waveform frame is 320
        samples."""
        return self.entry.frame_shift_ms(self.fbank)

    def __call__(self, waveform: np.ndarray) -> np.ndarray:
        """(N,) float waveform in [-1, 1] at ``sample_rate`` -> (T, feature_dim) float32; T may be 0."""
        return self.entry.extract(waveform, self.fbank)


def waveform_frames(waveform: np.ndarray) -> np.ndarray:
    """(N,) samples -> (ceil(N / 320), 320) float32: the samples in 20 ms rows, the last one zero-padded
    (the model reads them back as one waveform; at most 20 ms of silence is added)."""
    frames = -(-len(waveform) // WAVEFORM_FRAME)
    padded = np.zeros(frames * WAVEFORM_FRAME, dtype=np.float32)
    padded[: len(waveform)] = waveform
    return padded.reshape(frames, WAVEFORM_FRAME)


def frontend_named(kind: str, fbank: FbankOptions | None = None) -> Frontend:
    """The frontend called ``kind`` (one of ``FRONTEND_KINDS``); ``fbank`` defaults to FbankOptions()."""
    if kind not in FRONTENDS:
        raise ValueError(f"unknown frontend {kind!r}; expected one of {', '.join(FRONTENDS)}")
    return Frontend(kind, fbank if fbank is not None else FbankOptions())


__all__ = [
    "FRONTENDS",
    "FRONTEND_KINDS",
    "Frontend",
    "FrontendEntry",
    "frontend_named",
    "waveform_frames",
]
