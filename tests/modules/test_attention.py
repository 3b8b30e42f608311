import math

import pytest
import torch

from asr_pipeline.modules.attention import (
    RelativePositionalEncoding,
    RelPositionMultiHeadAttention,
    relative_shift,
)
from asr_pipeline.modules.masks import padding_mask


def sinusoid(distance: float, d_model: int) -> torch.Tensor:
    """Vaswani et al.'s encoding of one (possibly negative) position, written out channel by channel."""
    values = []
    for i in range(0, d_model, 2):
        angle = distance / 10000 ** (i / d_model)
        values += [math.sin(angle), math.cos(angle)]
    return torch.tensor(values)


def test_relative_positions_run_from_t_minus_1_down_to_minus_t_plus_1():
    pos = RelativePositionalEncoding(d_model=6)(4)  # T = 4 -> 2T-1 = 7 rows for distances 3..-3

    assert pos.shape == (7, 6)
    for row, distance in enumerate(range(3, -4, -1)):
        torch.testing.assert_close(pos[row], sinusoid(distance, 6))
    torch.testing.assert_close(pos[3], torch.tensor([0.0, 1.0] * 3))  # distance 0 sits at row T-1


def test_relative_shift_matches_direct_indexing():
    torch.manual_seed(0)
    for length in (1, 2, 5, 7):
        raw = torch.randn(2, 3, length, 2 * length - 1)  # (B, H, T, 2T-1), column m <-> distance T-1-m
        expected = torch.empty(2, 3, length, length)
        for i in range(length):
            for j in range(length):
                expected[..., i, j] = raw[..., i, length - 1 - (i - j)]

        assert torch.equal(relative_shift(raw), expected)


def test_relative_shift_on_a_hand_written_case():
    # Entry value = the distance i - j its column stands for, so the shifted matrix must read i - j.
    length = 3
    distances = torch.arange(length - 1, -length, -1).float()  # [2, 1, 0, -1, -2]
    raw = distances.expand(length, -1)  # every row (T, 2T-1) = [2, 1, 0, -1, -2]

    assert relative_shift(raw).tolist() == [[0, -1, -2], [1, 0, -1], [2, 1, 0]]


def test_relative_shift_rejects_a_position_axis_of_the_wrong_size():
    with pytest.raises(ValueError, match="2T-1"):
        relative_shift(torch.zeros(3, 4))


def reference_attention(module, x, key_padding_mask):
    """Transformer-XL attention computed pair by pair from the formula, without relative_shift."""
    batch, length, d_model = x.shape
    heads, head_dim = module.num_heads, module.head_dim
    q, k, v = module.qkv_proj(x).view(batch, length, 3, heads, head_dim).unbind(2)  # (B, T, H, K)
    scores = torch.empty(batch, heads, length, length)
    for i in range(length):
        for j in range(length):
            p = module.pos_proj(sinusoid(i - j, d_model)).view(heads, head_dim)  # (H, K)
            content = ((q[:, i] + module.pos_bias_u) * k[:, j]).sum(-1)  # (B, H)
            position = ((q[:, i] + module.pos_bias_v) * p).sum(-1)  # (B, H)
            scores[:, :, i, j] = (content + position) / math.sqrt(head_dim)
    scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
    context = torch.einsum("bhij,bjhk->bihk", scores.softmax(-1), v).reshape(batch, length, d_model)
    return module.out_proj(context)


def test_attention_matches_the_pairwise_formula_with_padding():
    torch.manual_seed(0)
    attention = RelPositionMultiHeadAttention(d_model=8, num_heads=2).eval()
    with torch.no_grad():  # non-zero u and v so both bias terms are exercised
        attention.pos_bias_u.normal_()
        attention.pos_bias_v.normal_()
    x = torch.randn(2, 5, 8)
    mask = padding_mask(torch.tensor([5, 3]), 5)
    pos = RelativePositionalEncoding(8)(5)

    with torch.no_grad():
        torch.testing.assert_close(attention(x, pos, mask), reference_attention(attention, x, mask))


def test_padded_keys_do_not_change_real_frames():
    torch.manual_seed(0)
    attention = RelPositionMultiHeadAttention(d_model=8, num_heads=2).eval()
    x = torch.randn(1, 7, 8)
    mask = padding_mask(torch.tensor([4]), 7)
    pos = RelativePositionalEncoding(8)(7)
    noisy = x.clone()
    noisy[:, 4:] = 100 * torch.randn(1, 3, 8)

    with torch.no_grad():
        torch.testing.assert_close(attention(x, pos, mask)[:, :4], attention(noisy, pos, mask)[:, :4])
        alone = attention(x[:, :4], RelativePositionalEncoding(8)(4), None)
        torch.testing.assert_close(attention(x, pos, mask)[:, :4], alone)


def test_attention_rejects_a_width_that_does_not_split_into_heads():
    with pytest.raises(ValueError, match="divisible"):
        RelPositionMultiHeadAttention(d_model=10, num_heads=4)
