import pytest
import torch

from asr_pipeline.modules.masks import padding_mask
from asr_pipeline.modules.subsampling import (
    DepthwiseSeparableConvSubsampling,
    TimeRecovery,
    TimeReduction,
    halved_length,
)


def test_a_centred_stride_2_conv_keeps_ceil_half_the_frames():
    # kernel 3, stride 2, padding 1: floor((T + 2 - 3) / 2) + 1 = floor((T - 1) / 2) + 1 = ceil(T / 2)
    lengths = torch.tensor([1, 2, 3, 7, 8, 97, 101])
    assert halved_length(lengths).tolist() == [1, 1, 2, 4, 4, 49, 51]


def test_subsampling_shapes_and_lengths_on_prime_lengths():
    # 97 frames -> ceil(97/2) = 49 -> ceil(49/2) = 25; 61 -> 31 -> 16; 23 -> 12 -> 6; 2 -> 1 -> 1.
    # 80 bins -> 40 -> 20, so the Linear sees channels * 20 = 8 * 20 inputs.
    subsampling = DepthwiseSeparableConvSubsampling(input_dim=80, channels=8, d_model=16)
    features = torch.randn(4, 97, 80)
    lengths = torch.tensor([97, 61, 23, 2])

    out, out_lengths = subsampling(features, lengths)

    assert out.shape == (4, 25, 16)
    assert out_lengths.tolist() == [25, 16, 6, 1]
    assert subsampling.linear.in_features == 8 * 20
    assert DepthwiseSeparableConvSubsampling.output_lengths(lengths).tolist() == [25, 16, 6, 1]


def test_subsampling_handles_an_odd_number_of_feature_bins():
    # 83 bins -> ceil(83/2) = 42 -> 21: the Linear's input width must follow the same arithmetic as time.
    out, _ = DepthwiseSeparableConvSubsampling(83, 4, 8)(torch.randn(1, 13, 83), torch.tensor([13]))
    assert out.shape == (1, 4, 8)


def test_second_conv_is_depthwise_separable():
    subsampling = DepthwiseSeparableConvSubsampling(input_dim=80, channels=8, d_model=16)
    assert subsampling.depthwise.groups == 8
    assert subsampling.pointwise.kernel_size == (1, 1)


def test_subsampling_of_a_padded_batch_matches_each_example_alone():
    torch.manual_seed(0)
    subsampling = DepthwiseSeparableConvSubsampling(input_dim=20, channels=4, d_model=8)
    lengths = torch.tensor([31, 17, 10])
    features = torch.randn(3, 31, 20)
    features[1, 17:] = 1e3  # garbage in the padding must not leak into real frames
    features[2, 10:] = -1e3

    out, out_lengths = subsampling(features, lengths)

    for b, length in enumerate(lengths.tolist()):
        alone, alone_length = subsampling(features[b : b + 1, :length], lengths[b : b + 1])
        assert alone_length.item() == out_lengths[b].item()
        torch.testing.assert_close(out[b, : out_lengths[b]], alone[0])


def test_time_reduction_halves_frames_and_lengths_exactly():
    # 25 -> ceil(25/2) = 13; 16 -> 8; 6 -> 3; 1 -> 1
    reduction = TimeReduction(d_model=8)
    x, lengths = reduction(torch.randn(4, 25, 8), torch.tensor([25, 16, 6, 1]))

    assert x.shape == (4, 13, 8)
    assert lengths.tolist() == [13, 8, 3, 1]
    assert reduction.depthwise.groups == 8 and reduction.depthwise.stride == (2,)


def test_time_reduction_of_a_padded_batch_matches_each_example_alone():
    torch.manual_seed(0)
    reduction = TimeReduction(d_model=8)
    lengths = torch.tensor([13, 7])
    x = torch.randn(2, 13, 8)
    x[1, 7:] = 1e3

    out, out_lengths = reduction(x, lengths)
    alone, _ = reduction(x[1:, :7], lengths[1:])

    assert out_lengths.tolist() == [7, 4]
    torch.testing.assert_close(out[1, :4], alone[0])


def test_time_recovery_repeats_frames_trims_to_the_skip_and_adds_it():
    recovery = TimeRecovery(d_model=2)
    with torch.no_grad():  # identity projection, zero bias: the output is skip + repeat(x)
        recovery.linear.weight.copy_(torch.eye(2))
        recovery.linear.bias.zero_()
    reduced = torch.tensor([[[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]])  # (1, 3, 2) = ceil(5 / 2) frames
    skip = torch.full((1, 5, 2), 10.0)

    out = recovery(reduced, skip)

    assert out[0, :, 0].tolist() == [11.0, 11.0, 12.0, 12.0, 13.0]


def test_time_reduction_rejects_an_even_kernel():
    with pytest.raises(ValueError, match="odd"):
        TimeReduction(d_model=8, kernel_size=4)


def test_reduce_then_recover_restores_the_frame_count_for_every_length():
    reduction, recovery = TimeReduction(4), TimeRecovery(4)
    for length in range(1, 12):
        x = torch.randn(1, length, 4)
        reduced, reduced_length = reduction(x, torch.tensor([length]))
        assert reduced_length.item() == reduced.size(1) == (length + 1) // 2
        assert recovery(reduced, x).shape == x.shape
        assert padding_mask(reduced_length, reduced.size(1)).sum() == 0
