"""modules.zipformer_blocks: the parts of a Zipformer layer: residual branches start small, BiasNorm keeps a
frame's length, Bypass's clamped scale, bounded relative positions, attention weights that never see padding,
and the convolution module's padding independence."""

from __future__ import annotations

import math

import pytest
import torch

from asr_pipeline.modules.zipformer_blocks import (
    BiasNorm,
    Bypass,
    ConvolutionModule,
    FeedForward,
    NonlinAttention,
    RelPositionAttentionWeights,
    SelfAttention,
    compact_relative_positions,
    scaled_linear,
)

B, T, D, H = 2, 7, 16, 4  # batch, frames, width, heads


def test_scaled_linear_starts_at_its_scale_of_the_default_initialisation():
    torch.manual_seed(0)
    plain = torch.nn.Linear(D, D)
    torch.manual_seed(0)
    scaled = scaled_linear(D, D, 0.1)
    torch.testing.assert_close(scaled.weight, 0.1 * plain.weight)
    torch.testing.assert_close(scaled.bias, 0.1 * plain.bias)
    assert scaled_linear(D, D, 0.1, bias=False).bias is None


def test_bias_norm_scales_each_frame_to_rms_e_and_keeps_its_direction():
    norm = BiasNorm(D)
    with torch.no_grad():
        norm.bias.zero_()
    x = torch.randn(B, T, D) * 5.0
    y = norm(x)
    # log_scale starts at 1: rms(y) = exp(1) per frame; no mean is subtracted, so y is x rescaled
    torch.testing.assert_close(y.pow(2).mean(-1).sqrt(), torch.full((B, T), math.e))
    torch.testing.assert_close(y / y.norm(dim=-1, keepdim=True), x / x.norm(dim=-1, keepdim=True))


def test_bias_norm_keeps_the_input_dtype():
    assert BiasNorm(D)(torch.randn(1, 2, D, dtype=torch.bfloat16)).dtype == torch.bfloat16


def test_bypass_mixes_input_and_output_with_its_scale_clamped_to_0_2_and_1():
    bypass = Bypass(3)
    with torch.no_grad():
        bypass.scale.copy_(torch.tensor([0.0, 0.5, 2.0]))
    orig, x = torch.zeros(1, 1, 3), torch.ones(1, 1, 3)
    torch.testing.assert_close(bypass(orig, x).flatten(), torch.tensor([0.2, 0.5, 1.0]))


def test_relative_positions_are_bounded_and_the_same_for_an_offset_whatever_the_length():
    short, long = compact_relative_positions(3, 8), compact_relative_positions(10, 8)
    assert tuple(short.shape) == (5, 8) and tuple(long.shape) == (19, 8)  # (2T-1, P)
    torch.testing.assert_close(short, long[9 - 2 : 9 + 3])  # offsets -2..2, centred on offset 0 at T-1
    assert short[:, -1].eq(1.0).all() and long.abs().max() <= 1.0
    # nearby offsets are told apart much better than far ones: 1 vs 2 frames, 8 vs 9
    assert (long[9 + 1] - long[9 + 2]).norm() > 2 * (long[9 + 8] - long[9 + 9]).norm()


def test_attention_weights_sum_to_one_over_real_frames_and_give_padding_exactly_zero():
    torch.manual_seed(0)
    attention = RelPositionAttentionWeights(D, pos_dim=8, num_heads=H, query_head_dim=4, pos_head_dim=2)
    lengths = torch.tensor([T, 4])
    weights = attention(torch.randn(B, T, D), compact_relative_positions(T, 8), lengths)
    assert tuple(weights.shape) == (B, H, T, T)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, H, T))
    assert weights[1, :, :, 4:].eq(0).all()


def test_attention_modules_map_b_t_d_to_b_t_d_over_shared_weights():
    weights = torch.softmax(torch.randn(B, H, T, T), dim=-1)
    x = torch.randn(B, T, D)
    assert tuple(SelfAttention(D, H, value_head_dim=3)(x, weights).shape) == (B, T, D)
    assert tuple(NonlinAttention(D, hidden_dim=12)(x, weights[:, :1]).shape) == (B, T, D)
    assert tuple(FeedForward(D, 32, 0.0, torch.nn.SiLU())(x).shape) == (B, T, D)


def test_the_convolution_module_ignores_padded_frames_and_needs_an_odd_kernel():
    torch.manual_seed(0)
    conv = ConvolutionModule(D, kernel_size=5, activation=torch.nn.SiLU())
    x = torch.randn(1, T, D)
    padded = torch.cat([x[:, :4], 100 * torch.randn(1, T - 4, D)], dim=1)
    torch.testing.assert_close(
        conv(padded, torch.tensor([4]))[:, :4], conv(x[:, :4], torch.tensor([4])), atol=1e-5, rtol=1e-4
    )
    with pytest.raises(ValueError, match="kernel must be odd"):
        ConvolutionModule(D, kernel_size=4, activation=torch.nn.SiLU())
