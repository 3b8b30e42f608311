"""features.augment: SpecAugment's masks stay within the utterance and their widths, fill with the
utterance mean, and leave the input alone."""

from __future__ import annotations

import pytest
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


def test_a_time_fraction_caps_the_frames_all_time_masks_cover_together():
    # 25 masks of up to 100 frames (icefall's CR-CTC SpecAugment) with f = 0.375: on 80 frames the budget is
    # 30 frames, so ceil(30 / 100) = 1 mask of at most 30 frames; on 1000 frames 4 masks of at most 93.
    augment = SpecAugment(time_masks=25, time_mask_max_frames=100, freq_masks=0, max_time_fraction=0.375)
    generator = torch.Generator().manual_seed(0)
    for num_frames, most_masks, widest in [(80, 1, 30), (1000, 4, 93)]:
        for _ in range(50):
            spans = augment.sample_spans(num_frames, 80, generator)
            assert len(spans.time) <= most_masks
            assert all(width <= widest for _, width in spans.time)
            assert sum(width for _, width in spans.time) <= 0.375 * num_frames


def test_a_batch_is_masked_per_utterance_within_its_frames_and_its_padding_is_kept():
    augment = SpecAugment(time_masks=2, time_mask_max_frames=5, freq_masks=1, freq_mask_max_bins=3)
    features = torch.randn(3, 12, 6) + 3.0  # (B, T, F)
    lengths = torch.tensor([12, 7, 4])

    masked = augment.batch(features, lengths, torch.Generator().manual_seed(1))

    assert torch.equal(masked[1, 7:], features[1, 7:]) and torch.equal(masked[2, 4:], features[2, 4:])
    assert not torch.equal(masked, features), "seed 1 draws at least one mask"


@pytest.mark.parametrize("mask_value", [None, 0.0])
def test_a_batch_takes_the_draws_and_fill_of_masking_each_utterance_alone(mask_value):
    """``batch`` masks on the device in one pass; row by row, ``__call__`` with the same generator draws the
    same spans and fills them with the same value (the utterance's mean over its own frames)."""
    augment = SpecAugment(
        time_masks=3, time_mask_max_frames=4, freq_masks=2, freq_mask_max_bins=3, mask_value=mask_value
    )
    features = torch.randn(4, 15, 7) + 2.0  # (B, T, F)
    lengths = [15, 9, 0, 5]

    masked = augment.batch(features, lengths, torch.Generator().manual_seed(3))

    generator = torch.Generator().manual_seed(3)
    expected = features.clone()
    for row, length in enumerate(lengths):
        expected[row, :length] = augment(features[row, :length], generator)
    torch.testing.assert_close(masked, expected, rtol=1e-6, atol=1e-6)
    assert not torch.equal(masked, features)
    assert torch.equal(
        augment.batch(features, torch.tensor(lengths), torch.Generator().manual_seed(3)), masked
    )
