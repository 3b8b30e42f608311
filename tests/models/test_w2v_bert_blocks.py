"""models.w2v_bert_blocks: the adapter's length arithmetic is a real Conv1d's; rotary positions rotate each
head (norms kept, scores depend on the offset only); self-attention under every position scheme ignores what
padded frames hold; the convolution module never sees the future. Shapes follow the module's legend."""

from __future__ import annotations

import pytest
import torch

from asr_pipeline.models.w2v_bert_blocks import (
    ConvolutionModule,
    RotaryEmbedding,
    SelfAttention,
    adapter_output_lengths,
    rotate,
)
from asr_pipeline.models.w2v_bert_spec import w2v_bert_config

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/models/conftest.py


@pytest.mark.parametrize(("kernel", "stride"), [(3, 2), (5, 2), (4, 3)])
def test_adapter_output_lengths_are_a_conv1d_with_half_stride_padding(kernel, stride):
    lengths = torch.tensor([3, 4, 7, 16, 97])  # each at least one window long
    conv = torch.nn.Conv1d(1, 1, kernel, stride=stride, padding=stride // 2)

    expected = [conv(torch.zeros(1, 1, int(n))).size(-1) for n in lengths]

    assert adapter_output_lengths(lengths, kernel, stride).tolist() == expected


def test_the_adapter_of_kernel_3_stride_2_halves_97_frames_to_49():
    # floor((97 + 2 * 1 - 3) / 2) + 1 = 49; floor((5 + 2 - 3) / 2) + 1 = 3
    assert adapter_output_lengths(torch.tensor([97, 5]), 3, 2).tolist() == [49, 3]


def test_rotary_positions_keep_each_heads_norm_and_make_scores_depend_on_the_offset_only():
    heads, head_size, length = 2, 8, 12
    cos, sin = RotaryEmbedding(head_size, base=10000)(length)  # (T, 1, K) each
    generator = torch.Generator().manual_seed(0)
    query, key = torch.randn(2, heads * head_size, generator=generator)
    # The same query and key at every frame: after rotation, score(t, s) may depend only on t - s.
    q = rotate(query.expand(1, length, -1), cos, sin, heads).unflatten(-1, (heads, head_size))  # (1, T, H, K)
    k = rotate(key.expand(1, length, -1), cos, sin, heads).unflatten(-1, (heads, head_size))

    assert torch.allclose(
        q.norm(dim=-1), query.unflatten(-1, (heads, head_size)).norm(dim=-1).expand(1, length, -1)
    )
    scores = torch.einsum("thk,shk->hts", q[0], k[0])  # (H, T, T)
    for offset in (-3, 0, 5):
        diagonal = scores.diagonal(offset=offset, dim1=-2, dim2=-1)  # (H, T - |offset|)
        assert torch.allclose(diagonal, diagonal[:, :1].expand_as(diagonal), atol=1e-5), offset
    assert not torch.allclose(scores[:, 0, 0], scores[:, 5, 0]), (
        "the offset changes the score: positions count"
    )


@pytest.mark.parametrize("scheme", [None, "relative_key", "rotary"])
def test_self_attention_output_at_real_frames_ignores_what_the_padded_frames_hold(scheme):
    config = w2v_bert_config("tiny", position_embeddings_type=scheme, dropout=0.0)
    torch.manual_seed(0)
    attention = SelfAttention(config, config.d_model, scheme).eval()
    lengths = torch.tensor([13, 7])
    x = torch.randn(2, 13, config.d_model)  # (B, T, D)
    noisy = x.clone()
    noisy[1, 7:] = 100 * torch.randn(6, config.d_model)  # only example 1's padding changes
    positions = (
        RotaryEmbedding(config.head_size, config.rotary_embedding_base)(13) if scheme == "rotary" else None
    )

    with torch.no_grad():
        clean_out, noisy_out = attention(x, lengths, positions), attention(noisy, lengths, positions)

    assert clean_out.shape == (2, 13, config.d_model)
    assert torch.allclose(clean_out[1, :7], noisy_out[1, :7], atol=1e-5)
    assert torch.equal(clean_out[0], noisy_out[0])


def test_the_convolution_module_is_causal_a_frame_never_sees_a_later_one():
    config = w2v_bert_config("tiny", dropout=0.0)
    torch.manual_seed(0)
    convolution = ConvolutionModule(config).eval()
    lengths = torch.tensor([20])
    x = torch.randn(1, 20, config.d_model)  # (B, T, D)
    changed = x.clone()
    changed[0, 12:] = torch.randn(8, config.d_model)

    with torch.no_grad():
        before, after = convolution(x, lengths), convolution(changed, lengths)

    assert torch.allclose(before[0, :12], after[0, :12], atol=1e-6), "frames 0..11 do not see frames 12.."
    assert not torch.allclose(before[0, 12:], after[0, 12:])
