"""features.augment: SpecAugment's masks stay within the utterance and their widths, fill with the
utterance mean, and leave the input alone."""

from __future__ import annotations

import torch

from asr_pipeline.features.augment import SpecAugment


def test_masks_stay_within_the_utterance_and_their_configured_width():
    augment = SpecAugment(time_masks=3, time_mask_max_frames=40, freq_masks=2, freq_mask_max_bins=15)
    generator = torch.Generator().manual_seed(0)
    for num_frames in [1, 5, 39, 40, 41, 300]:
        for _ in range(50):
            spans = augment.sample_spans(num_frames, 80, generator)
            assert len(spans.time) <= 3 and len(spans.freq) <= 2
            for start, width in spans.time:
                assert 1 <= width <= min(40, num_frames) and start >= 0 and start + width <= num_frames
            for start, width in spans.freq:
                assert 1 <= width <= 15 and start >= 0 and start + width <= 80


def test_only_cells_under_a_mask_change_and_they_take_the_utterance_mean():
    augment = SpecAugment(time_masks=2, time_mask_max_frames=10, freq_masks=2, freq_mask_max_bins=4)
    features = torch.randn(50, 20) + 3.0  # (T, F); mean far from 0 so a zero fill would show
    spans = augment.sample_spans(50, 20, torch.Generator().manual_seed(4))
    masked = augment(features, torch.Generator().manual_seed(4))  # same seed -> the same spans

    under_mask = torch.zeros(50, 20, dtype=torch.bool)
    for start, width in spans.time:
        under_mask[start : start + width, :] = True
    for start, width in spans.freq:
        under_mask[:, start : start + width] = True
    assert under_mask.any(), "seed 4 draws at least one mask"
    assert torch.equal(masked[~under_mask], features[~under_mask])
    assert torch.allclose(masked[under_mask], features.mean())


def test_the_input_is_not_modified():
    features = torch.randn(30, 8)
    original = features.clone()

    SpecAugment(time_mask_max_frames=10, freq_mask_max_bins=4, mask_value=0.0)(features)

    assert torch.equal(features, original)


def test_zero_masks_leave_features_unchanged():
    features = torch.randn(30, 8)

    assert torch.equal(SpecAugment(time_masks=0, freq_masks=0)(features), features)
