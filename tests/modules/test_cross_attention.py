"""modules.cross_attention: queries attend to a memory; padded memory frames change nothing; a memory that is
all padding gives finite outputs; the width must split into the heads."""

from __future__ import annotations

import pytest
import torch

from asr_pipeline.modules.cross_attention import CrossAttention


def test_queries_of_any_length_read_a_memory_of_any_length():
    attention = CrossAttention(d_model=16, num_heads=4).eval()

    out = attention(torch.randn(2, 5, 16), torch.randn(2, 9, 16))

    assert out.shape == (2, 5, 16)  # (B, U, D): one output per query, whatever T


def test_padded_memory_frames_do_not_change_the_output():
    torch.manual_seed(0)
    attention = CrossAttention(d_model=16, num_heads=4).eval()
    queries, memory = torch.randn(1, 3, 16), torch.randn(1, 6, 16)
    padded = torch.cat([memory, 100 * torch.randn(1, 4, 16)], dim=1)  # 4 junk frames after the real 6
    mask = torch.tensor([[False] * 6 + [True] * 4])

    alone = attention(queries, memory)
    with_padding = attention(queries, padded, mask)

    torch.testing.assert_close(with_padding, alone, rtol=1e-5, atol=1e-5)
    assert (attention(queries, padded) - alone).abs().max() > 1e-2  # without the mask the junk is read


def test_a_memory_that_is_all_padding_gives_finite_outputs():
    attention = CrossAttention(d_model=8, num_heads=2).eval()

    out = attention(torch.randn(2, 3, 8), torch.randn(2, 4, 8), torch.ones(2, 4, dtype=torch.bool))

    assert torch.isfinite(out).all()


def test_a_width_the_heads_do_not_divide_is_refused():
    with pytest.raises(ValueError, match="d_model=10 must be divisible by num_heads=4"):
        CrossAttention(d_model=10, num_heads=4)
