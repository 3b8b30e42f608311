"""modules.zipformer_subsampling: the front end's frame arithmetic (100 Hz -> 50 Hz, valid convs in time), the
stacks' down- and upsampling lengths, and the channel cut or pad between stacks of different widths."""

from __future__ import annotations

import pytest
import torch

from asr_pipeline.modules.zipformer_subsampling import (
    MIN_INPUT_FRAMES,
    Conv2dSubsampling,
    convert_num_channels,
    downsampled_lengths,
    embed_output_lengths,
    upsample,
)


@pytest.mark.parametrize(("frames", "expected"), [(9, 1), (10, 1), (11, 2), (100, 46), (1001, 497)])
def test_the_front_end_makes_t_minus_7_over_2_frames(frames, expected):
    # conv 3x3: T - 2; stride 2: (T - 5) // 2 + 1; stride (1, 2): - 2 -> (T - 7) // 2
    assert embed_output_lengths(torch.tensor([frames])).item() == expected


def test_the_front_end_module_agrees_with_its_length_rule_and_keeps_padding_out():
    torch.manual_seed(0)
    embed = Conv2dSubsampling(input_dim=16, output_dim=12, channels=(2, 4, 8), dropout=0.0).eval()
    assert embed.out_width == 3  # F': 16 -> (16 - 1) // 2 = 7 -> (7 - 1) // 2 = 3
    features = torch.randn(2, 31, 16)  # (B, T, F)
    lengths = torch.tensor([31, 19])
    out, out_lengths = embed(features, lengths)
    assert tuple(out.shape) == (2, 12, 12)  # (31 - 7) // 2 = 12 frames of D = 12
    assert out_lengths.tolist() == [12, 6]
    # the shorter utterance alone gives the same real frames: its padding never reaches them
    alone, _ = embed(features[1:, :19], lengths[1:])
    torch.testing.assert_close(out[1, :6], alone[0], atol=1e-5, rtol=1e-4)


def test_the_minimum_input_is_nine_frames_and_seven_feature_bins():
    assert embed_output_lengths(torch.tensor([MIN_INPUT_FRAMES])).item() == 1
    with pytest.raises(ValueError, match="at least 7 feature bins, got input_dim=6"):
        Conv2dSubsampling(input_dim=6, output_dim=8, channels=(2, 2, 2), dropout=0.0)


@pytest.mark.parametrize(
    ("length", "factor", "expected"), [(8, 2, 4), (9, 2, 5), (9, 4, 3), (1, 8, 1), (0, 2, 0)]
)
def test_a_downsampled_frame_is_real_when_its_first_input_frame_is(length, factor, expected):
    assert downsampled_lengths(torch.tensor([length]), factor).item() == expected


def test_upsampling_repeats_each_frame_and_cuts_to_the_original_length():
    x = torch.arange(3.0).view(1, 3, 1)  # (B, T/f, D)
    assert upsample(x, 2, 5).flatten().tolist() == [0.0, 0.0, 1.0, 1.0, 2.0]


def test_channels_are_cut_to_a_narrower_stack_or_zero_padded_to_a_wider_one():
    x = torch.ones(1, 2, 4)
    assert tuple(convert_num_channels(x, 3).shape) == (1, 2, 3)
    wider = convert_num_channels(x, 6)
    assert tuple(wider.shape) == (1, 2, 6) and wider[..., 4:].abs().sum() == 0


def test_lengths_under_the_minimum_give_no_frames_not_fewer():
    """A compiled or GPU forward does not read the lengths back to refuse a short utterance: it gets no frames."""
    assert embed_output_lengths(torch.tensor([0, 5, 8, 9, 12])).tolist() == [0, 0, 0, 1, 2]
