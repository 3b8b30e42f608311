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


def test_utterance_normalize_uses_only_real_frames_and_zeroes_padding():
    from asr_pipeline.modules.masks import utterance_normalize

    torch.manual_seed(0)
    alone = torch.randn(1, 5, 3) * 4 + 10
    padded = torch.cat([alone, torch.full((1, 4, 3), 1e4)], dim=1)  # junk in the padding
    out = utterance_normalize(padded, torch.tensor([5]))
    torch.testing.assert_close(out[:, :5], utterance_normalize(alone, torch.tensor([5])))
    assert torch.all(out[:, 5:] == 0)
    torch.testing.assert_close(out[0, :5].mean(0), torch.zeros(3), atol=1e-5, rtol=0)
    torch.testing.assert_close(out[0, :5].std(0, unbiased=False), torch.ones(3), atol=1e-4, rtol=0)


def test_a_models_input_normalization_is_utterance_cmvn_or_nothing():
    from asr_pipeline.modules.masks import normalize_input, utterance_normalize

    features, lengths = torch.randn(2, 6, 3) * 5 + 7, torch.tensor([6, 4])
    assert torch.equal(
        normalize_input(features, lengths, "utterance"), utterance_normalize(features, lengths)
    )
    assert normalize_input(features, lengths, None) is features
