"""SpecAugment time and frequency masking (Park et al., 2019, "SpecAugment", arXiv:1904.08779).

Applied per utterance to a (T, F) feature matrix before padding, so a mask can never land on padding
and every utterance draws its own masks. Time warping from the paper is left out: it costs the most and
gives the least (the paper's own ablation, Table 6).

``max_time_fraction`` caps the frames the time masks may cover together at that share of the utterance, as
lhotse's ``max_frames_mask_fraction`` does (fewer and narrower masks on short utterances), so a larger
count of masks (CR-CTC's, ``training.cr_ctc``) cannot blank a short utterance out. ``SpecAugment.batch``
masks each utterance of a padded batch within its own frames.

Masked cells take the utterance's mean value by default rather than zero: for unnormalised log-mel
features zero is a very loud value, whereas the mean is what the model sees on average (lhotse does the
same). Pass ``mask_value=0.0`` for globally normalised features if preferred.

``WaveformAugment`` works on the waveform, before features exist (so only where features are computed on
the fly, ``data.audio_dataset``): a random gain and additive Gaussian noise per utterance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor


@dataclass(frozen=True)
class MaskSpans:
    """Where masks fall: ``(start, width)`` pairs, ``start + width`` never past the axis length."""

    time: tuple[tuple[int, int], ...]
    freq: tuple[tuple[int, int], ...]


class SpecAugment:
    """Draws ``time_masks`` time masks of width U[0, time_mask_max_frames] and ``freq_masks`` frequency
    masks of width U[0, freq_mask_max_bins], each clipped to the utterance. With ``max_time_fraction`` f
    and T frames: at most ceil(f * T / time_mask_max_frames) time masks, each at most
    floor(f * T / masks) frames wide (lhotse's rule), so together they never cover more than f * T.

    Randomness comes from ``generator`` or, by default, torch's global RNG, which the DataLoader seeds
    differently in every worker and the training loop checkpoints, so resumed runs draw the same masks.
    """

    def __init__(
        self,
        time_masks: int = 2,
        time_mask_max_frames: int = 40,
        freq_masks: int = 2,
        freq_mask_max_bins: int = 15,
        mask_value: float | None = None,
        max_time_fraction: float | None = None,
    ) -> None:
        for name, value in [
            ("time_masks", time_masks),
            ("time_mask_max_frames", time_mask_max_frames),
            ("freq_masks", freq_masks),
            ("freq_mask_max_bins", freq_mask_max_bins),
        ]:
            if value < 0:
                raise ValueError(f"SpecAugment {name} must be >= 0, got {value}")
        if max_time_fraction is not None and not 0.0 < max_time_fraction <= 1.0:
            raise ValueError(f"SpecAugment max_time_fraction must be in (0, 1], got {max_time_fraction}")
        self.time_masks = time_masks
        self.time_mask_max_frames = time_mask_max_frames
        self.freq_masks = freq_masks
        self.freq_mask_max_bins = freq_mask_max_bins
        self.mask_value = mask_value
        self.max_time_fraction = max_time_fraction

    def sample_spans(
        self, num_frames: int, num_bins: int, generator: torch.Generator | None = None
    ) -> MaskSpans:
        time_masks, max_frames = self.time_masks, self.time_mask_max_frames
        if self.max_time_fraction is not None and time_masks and max_frames:
            budget = self.max_time_fraction * num_frames  # frames all time masks may cover together
            time_masks = min(time_masks, math.ceil(budget / max_frames))
            max_frames = min(max_frames, int(budget // time_masks)) if time_masks else 0
        return MaskSpans(
            time=_spans(time_masks, max_frames, num_frames, generator),
            freq=_spans(self.freq_masks, self.freq_mask_max_bins, num_bins, generator),
        )

    def __call__(self, features: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """A masked copy of ``features`` (T, F); the input is left untouched."""
        if features.dim() != 2:
            raise ValueError(f"SpecAugment expects one utterance (T, F), got shape {tuple(features.shape)}")
        num_frames, num_bins = features.shape
        spans = self.sample_spans(num_frames, num_bins, generator)
        if not spans.time and not spans.freq:
            return features
        fill = float(features.mean()) if self.mask_value is None else self.mask_value
        masked = features.clone()
        for start, width in spans.time:
            masked[start : start + width, :] = fill
        for start, width in spans.freq:
            masked[:, start : start + width] = fill
        return masked

    def batch(
        self, features: Tensor, lengths: Tensor | Sequence[int], generator: torch.Generator | None = None
    ) -> Tensor:
        """A masked copy of a padded batch ``features`` (B, T, F): each utterance masked within its
        ``lengths`` (B,) frames as ``__call__`` masks one (the same draws), its padding left as it was.

        The spans are drawn on the host from the lengths, which a list gives without reading ``features``'
        device (a batch's lengths read before its copy to the GPU); the masks and the fill go to the device
        in one pass, and nothing comes back: the training step does not wait for the GPU."""
        frames = lengths.tolist() if isinstance(lengths, Tensor) else list(lengths)
        rows, width, bins = features.shape
        time = torch.zeros(rows, width, dtype=torch.bool)  # (B, T)
        freq = torch.zeros(rows, bins, dtype=torch.bool)  # (B, F)
        for row, length in enumerate(frames):
            spans = self.sample_spans(length, bins, generator)
            for start, span in spans.time:
                time[row, start : start + span] = True
            for start, span in spans.freq:
                freq[row, start : start + span] = True
        counts = torch.tensor(frames, dtype=torch.int64)  # (B,)
        inside = torch.arange(width) < counts[:, None]  # (B, T): the utterance's frames, not its padding
        device = features.device
        time, freq, inside = (t.to(device, non_blocking=True) for t in (time, freq, inside))
        mask = (time[:, :, None] | freq[:, None, :]) & inside[:, :, None]  # (B, T, F)
        if self.mask_value is None:  # each utterance's mean over its own frames, as __call__ takes it
            cells = (counts * bins).clamp(min=1).to(device, non_blocking=True)  # (B,)
            fill = (features * inside[:, :, None]).sum(dim=(1, 2)) / cells  # (B,)
            return torch.where(mask, fill[:, None, None].to(features.dtype), features)
        return features.masked_fill(mask, self.mask_value)


def _spans(
    count: int, max_width: int, length: int, generator: torch.Generator | None
) -> tuple[tuple[int, int], ...]:
    spans = []
    for _ in range(count):
        width = int(torch.randint(0, min(max_width, length) + 1, (), generator=generator))
        if width == 0:
            continue
        start = int(torch.randint(0, length - width + 1, (), generator=generator))
        spans.append((start, width))
    return tuple(spans)


NOISE_KINDS = ("gaussian", "uniform")


class WaveformAugment:
    """A gain drawn uniformly in [``gain_min_db``, ``gain_max_db``] dB, then noise applied to one utterance's
    waveform (in the [-1, 1] scale): Gaussian of standard deviation ``noise_std``, or with ``noise_kind``
    "uniform" drawn uniformly from [-noise_std, noise_std] (the reference trainer's meaning of
    --waveform-noise-std: the amplitude, so its noise is quieter, std noise_std / sqrt(3)).

    Gain first, so the noise level is absolute rather than relative to the utterance: the model sees the
    same noise floor under louder and quieter speech, which is what varies between recordings. Nothing is
    clipped: the fbank frontend takes any float amplitude, and clipping would add distortion nobody
    asked for. A uniform draw in dB (not in linear amplitude) spreads loudness evenly on the scale the ear
    and the log-mel features use.
    """

    def __init__(
        self,
        gain_min_db: float = 0.0,
        gain_max_db: float = 0.0,
        noise_std: float = 0.0,
        noise_kind: str = "gaussian",
    ) -> None:
        if noise_kind not in NOISE_KINDS:
            raise ValueError(f"noise_kind must be one of {', '.join(NOISE_KINDS)}, got {noise_kind!r}")
        if gain_min_db > gain_max_db:
            raise ValueError(f"gain_min_db={gain_min_db} must be <= gain_max_db={gain_max_db}")
        if noise_std < 0:
            raise ValueError(f"noise_std must be >= 0, got {noise_std}")
        self.gain_min_db = gain_min_db
        self.gain_max_db = gain_max_db
        self.noise_std = noise_std
        self.noise_kind = noise_kind

    @property
    def active(self) -> bool:
        return (self.gain_min_db, self.gain_max_db, self.noise_std) != (0.0, 0.0, 0.0)

    def __call__(self, waveform: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """An augmented float32 copy of ``waveform`` (N,); ``rng`` makes the draw reproducible."""
        gain_db = rng.uniform(self.gain_min_db, self.gain_max_db)
        augmented = waveform.astype(np.float32) * np.float32(10.0 ** (gain_db / 20.0))
        if self.noise_std > 0 and self.noise_kind == "uniform":
            augmented += rng.uniform(-self.noise_std, self.noise_std, size=waveform.shape).astype(np.float32)
        elif self.noise_std > 0:
            augmented += rng.normal(0.0, self.noise_std, size=waveform.shape).astype(np.float32)
        return augmented


__all__ = ["NOISE_KINDS", "MaskSpans", "SpecAugment", "WaveformAugment"]
