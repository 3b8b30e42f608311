"""Multi-head self-attention with Transformer-XL relative positions (Dai et al., 2019, §3.3).

The score between query frame i and key frame j is

    (q_i + u) · k_j  +  (q_i + v) · W_p p_(i-j)          (both divided by sqrt(d_head))
    \\_ content _/       \\_______ position _______/

where p_r is a sinusoid of the relative distance r = i - j, W_p a projection without bias, and u, v learned
per-head biases ("global content" and "global position" terms). Conformer and Squeezeformer use this
attention unchanged; it lets a model trained on short utterances run on longer ones.

Positions are laid out from r = T-1 down to -(T-1), so row i of the (T, 2T-1) position scores holds
the distance i - j at column T-1-i+j. ``relative_shift`` (``asr_kernels.relative_shift``) moves them into (T, T): out[..., i, j] =
scores[..., i, T-1-i+j]; its reference is Dai et al.'s pad-and-reshape (appendix B), its Triton kernel reads
each element in place without the padded copy.

Dimension legend: B batch, H heads, T frames, P = 2T - 1 relative positions, D model width,
K = D / H head width.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from asr_kernels.relative_shift import relative_shift
from asr_pipeline.modules.widening import mark_fused_linear


def head_width(d_model: int, num_heads: int) -> int:
    """K = D / H, the width of one head; raises ValueError unless ``num_heads`` divides ``d_model``."""
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}")
    return d_model // num_heads


class RelativePositionalEncoding(nn.Module):
    """Sinusoids (Vaswani et al., 2017) of the relative distances T-1, ..., 0, ..., -(T-1)."""

    def __init__(self, d_model: int, base: float = 10000.0) -> None:
        super().__init__()
        if d_model % 2:
            raise ValueError(f"sinusoidal positions need an even d_model, got {d_model}")
        inverse_frequency = base ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
        self.register_buffer("inverse_frequency", inverse_frequency, persistent=False)  # (D/2,)

    def forward(self, length: int) -> Tensor:
        distances = torch.arange(length - 1, -length, -1, device=self.inverse_frequency.device)  # (P,)
        angles = distances[:, None].float() * self.inverse_frequency[None, :]  # (P, D/2)
        # Interleave sin/cos so channel 2i is sin and 2i+1 is cos of the same frequency.
        return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(1)  # (P, D)


class RelPositionMultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = head_width(d_model, num_heads)
        self.dropout = dropout
        self.qkv_proj = nn.Linear(d_model, 3 * d_model)
        mark_fused_linear(self.qkv_proj, (1, 1, 1))  # q, k, v (modules.widening)
        self.pos_proj = nn.Linear(d_model, d_model, bias=False)  # W_p: positions carry no offset
        self.pos_bias_u = nn.Parameter(torch.zeros(num_heads, self.head_dim))  # content bias u
        self.pos_bias_v = nn.Parameter(torch.zeros(num_heads, self.head_dim))  # position bias v
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, x: Tensor, pos_emb: Tensor, key_padding_mask: Tensor | None = None) -> Tensor:
        """x: (B, T, D); pos_emb: (2T-1, D) from RelativePositionalEncoding; key_padding_mask: (B, T)
        bool, True at padding. Returns (B, T, D)."""
        batch, length, d_model = x.shape
        heads, head_dim = self.num_heads, self.head_dim
        qkv = self.qkv_proj(x).view(batch, length, 3, heads, head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (B, H, T, K)
        p = self.pos_proj(pos_emb.to(x.dtype)).view(-1, heads, head_dim).transpose(0, 1)  # (H, P, K)

        q_pos = q + self.pos_bias_v[:, None, :]  # (B, H, T, K)
        position_scores = relative_shift(q_pos @ p.transpose(-1, -2))  # (B, H, T, T)
        # The position term rides in as an additive mask so the content term, softmax and weighted sum
        # go through the fused scaled_dot_product_attention; it scales q·k by 1/sqrt(K) itself.
        bias = position_scores / math.sqrt(head_dim)
        if key_padding_mask is not None:
            # finfo.min, not -inf: a fully padded row (a zero-length example) then averages instead of NaN.
            bias = bias.masked_fill(key_padding_mask[:, None, None, :], torch.finfo(bias.dtype).min)
        q_content = q + self.pos_bias_u[:, None, :]  # (B, H, T, K)
        context = F.scaled_dot_product_attention(
            q_content, k, v, attn_mask=bias, dropout_p=self.dropout if self.training else 0.0
        )  # (B, H, T, K)
        return self.out_proj(context.transpose(1, 2).reshape(batch, length, d_model))  # (B, T, D)
