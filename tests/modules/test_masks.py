import torch

from asr_pipeline.modules.masks import mask_padded_frames, padding_mask


def test_padding_mask_is_true_exactly_past_each_length():
    mask = padding_mask(torch.tensor([3, 1, 0]), max_length=4)

    assert mask.tolist() == [
        [False, False, False, True],
        [False, True, True, True],
        [True, True, True, True],
    ]


def test_padding_mask_defaults_to_the_longest_length():
    assert padding_mask(torch.tensor([2, 5])).shape == (2, 5)


def test_mask_padded_frames_zeroes_padding_and_keeps_real_frames():
    x = torch.randn(2, 4, 3, 5)  # (B, T, C, F): the mask broadcasts over trailing dims
    masked = mask_padded_frames(x, padding_mask(torch.tensor([4, 2]), 4))

    assert torch.equal(masked[0], x[0])
    assert torch.equal(masked[1, :2], x[1, :2])
    assert masked[1, 2:].abs().sum() == 0
