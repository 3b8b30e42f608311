"""Which features each model architecture eats: the frontend an architecture's spec names
(``models.architectures.FRONTENDS``, the torch-free mirror of each ``ArchitectureSpec.frontend``).

    frontend   F (per frame)  frame shift
    fbank      num_mel_bins   10 ms   (features/fbank.py)      squeezeformer, zipformer, paraformer
    w2v-bert   160            20 ms   (features/w2v_bert.py)   w2v-bert
    waveform   320            20 ms   the 16 kHz samples, 320 per frame   hubert, hubert-pretrain
    mfcc       39             10 ms   (features/mfcc.py)       by name: HuBERT's first targets

A ``Frontend`` is a small frozen value (picklable, so worker processes get it with their rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from asr_pipeline.features import mfcc, w2v_bert
from asr_pipeline.features.fbank import FbankOptions, compute_fbank

# Names only (no torch): which architectures exist and which frontend each one's spec names.
from asr_pipeline.models.architectures import ARCHITECTURES, DEFAULT_ARCHITECTURE, FRONTENDS

FRONTEND_KINDS = ("fbank", "w2v-bert", "waveform", "mfcc")
WAVEFORM_RATE, WAVEFORM_FRAME = 16000, 320  # HuBERT's input rate and its conv stack's stride (20 ms)


@dataclass(frozen=True)
class Frontend:
    """Waveform -> (T, F) float32 features for one family of architectures."""

    kind: Literal["fbank", "w2v-bert", "waveform", "mfcc"]
    fbank: FbankOptions  # used by the fbank kind; w2v-bert's settings are fixed by its checkpoint

    @property
    def sample_rate(self) -> int:
        if self.kind == "waveform":
            return WAVEFORM_RATE
        if self.kind == "mfcc":
            return mfcc.MFCC_RATE
        return w2v_bert.SAMPLE_RATE if self.kind == "w2v-bert" else self.fbank.sample_rate

    @property
    def feature_dim(self) -> int:
        if self.kind == "waveform":
            return WAVEFORM_FRAME
        if self.kind == "mfcc":
            return mfcc.MFCC_DIM
        return w2v_bert.FEATURE_DIM if self.kind == "w2v-bert" else self.fbank.num_mel_bins

    @property
    def frame_shift_ms(self) -> float:
        """Audio time per output frame: w2v-bert stacks two 10 ms frames into one; a waveform frame is 320
        samples."""
        if self.kind == "waveform":
            return 1000.0 * WAVEFORM_FRAME / WAVEFORM_RATE
        if self.kind == "mfcc":
            return mfcc.MFCC_SHIFT_MS
        if self.kind == "w2v-bert":
            return w2v_bert.STRIDE * w2v_bert.MEL_OPTIONS.frame_shift_ms
        return self.fbank.frame_shift_ms

    def __call__(self, waveform: np.ndarray) -> np.ndarray:
        """(N,) float waveform in [-1, 1] at ``sample_rate`` -> (T, feature_dim) float32; T may be 0."""
        if self.kind == "waveform":
            return waveform_frames(waveform)
        if self.kind == "mfcc":
            return mfcc.compute_mfcc39(waveform)
        if self.kind == "w2v-bert":
            return w2v_bert.compute_w2v_bert_features(waveform)
        return compute_fbank(waveform, self.fbank)


def waveform_frames(waveform: np.ndarray) -> np.ndarray:
    """(N,) samples -> (ceil(N / 320), 320) float32: the samples in 20 ms rows, the last one zero-padded
    (the model reads them back as one waveform; at most 20 ms of silence is added)."""
    frames = -(-len(waveform) // WAVEFORM_FRAME)
    padded = np.zeros(frames * WAVEFORM_FRAME, dtype=np.float32)
    padded[: len(waveform)] = waveform
    return padded.reshape(frames, WAVEFORM_FRAME)


def frontend_named(kind: str, fbank: FbankOptions | None = None) -> Frontend:
    """The frontend called ``kind`` (one of ``FRONTEND_KINDS``); ``fbank`` defaults to FbankOptions()."""
    if kind not in FRONTEND_KINDS:
        raise ValueError(f"unknown frontend {kind!r}; expected one of {', '.join(FRONTEND_KINDS)}")
    return Frontend(kind, fbank if fbank is not None else FbankOptions())  # type: ignore[arg-type]


def frontend_for(architecture: str, fbank: FbankOptions | None = None) -> Frontend:
    """The frontend of ``architecture`` (one of ``ARCHITECTURES``); ``fbank`` defaults to FbankOptions()."""
    if architecture not in FRONTENDS:
        raise ValueError(f"unknown architecture {architecture!r}; expected one of {', '.join(ARCHITECTURES)}")
    return frontend_named(FRONTENDS[architecture], fbank)


__all__ = [
    "ARCHITECTURES",
    "DEFAULT_ARCHITECTURE",
    "FRONTEND_KINDS",
    "Frontend",
    "frontend_for",
    "frontend_named",
    "waveform_frames",
]
