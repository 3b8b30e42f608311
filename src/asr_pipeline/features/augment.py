"""SpecAugment time and frequency masking (Park et al., 2019, "SpecAugment", arXiv:1904.08779).

Applied per utterance to a (T, F) feature matrix before padding, so a mask can never land on padding
and every utterance draws its own masks. Time warping from the paper is left out: it costs the most and
gives the least (the paper's own ablation, Table 6).

Masked cells take the utterance's mean value by default rather than zero: for unnormalised log-mel
features zero is a very loud value, whereas the mean is what the model sees on average (lhotse does the
same). Pass ``mask_value=0.0`` for globally normalised features if preferred.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class MaskSpans:
    """Where masks fall: ``(start, width)`` pairs, ``start + width`` never past the axis length."""

    time: tuple[tuple[int, int], ...]
    freq: tuple[tuple[int, int], ...]


class SpecAugment:
    """Draws ``time_masks`` time masks of width U[0, time_mask_max_frames] and ``freq_masks`` frequency
    masks of width U[0, freq_mask_max_bins], each clipped to the utterance.

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
    ) -> None:
        for name, value in [
            ("time_masks", time_masks),
            ("time_mask_max_frames", time_mask_max_frames),
            ("freq_masks", freq_masks),
            ("freq_mask_max_bins", freq_mask_max_bins),
        ]:
            if value < 0:
                raise ValueError(f"SpecAugment {name} must be >= 0, got {value}")
        self.time_masks = time_masks
        self.time_mask_max_frames = time_mask_max_frames
        self.freq_masks = freq_masks
        self.freq_mask_max_bins = freq_mask_max_bins
        self.mask_value = mask_value

    def sample_spans(
        self, num_frames: int, num_bins: int, generator: torch.Generator | None = None
    ) -> MaskSpans:
        return MaskSpans(
            time=_spans(self.time_masks, self.time_mask_max_frames, num_frames, generator),
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


__all__ = ["MaskSpans", "SpecAugment"]
