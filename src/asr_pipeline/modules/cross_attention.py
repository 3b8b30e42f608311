"""Multi-head cross-attention (Vaswani et al., 2017, §3.2.2): queries from one sequence, keys and values from
another, e.g. a decoder's token queries attending to an encoder's frames.

No positions: the keys' order reaches the queries only through what the encoder wrote into each frame. Padded
keys get ``finfo.min`` in the additive mask (as ``attention.py``), so a query whose every key is padding (a
zero-length memory) averages instead of giving NaN.

Dimension legend: B batch, H heads, U query positions, T key frames, D model width, K = D / H head width.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from asr_pipeline.modules.attention import head_width
from asr_pipeline.modules.widening import mark_fused_linear


class CrossAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = head_width(d_model, num_heads)
        self.dropout = dropout
        self.q_proj = nn.Linear(d_model, d_model)
        self.kv_proj = nn.Linear(d_model, 2 * d_model)
        mark_fused_linear(self.kv_proj, (1, 1))  # k, v (modules.widening)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, x: Tensor, memory: Tensor, memory_padding_mask: Tensor | None = None) -> Tensor:
        """x: (B, U, D) queries; memory: (B, T, D); memory_padding_mask: (B, T) bool, True at padding.
        Returns (B, U, D)."""
        batch, length, d_model = x.shape
        heads, head_dim = self.num_heads, self.head_dim
        q = self.q_proj(x).view(batch, length, heads, head_dim).transpose(1, 2)  # (B, H, U, K)
        kv = self.kv_proj(memory).view(batch, memory.size(1), 2, heads, head_dim)
        k, v = kv.permute(2, 0, 3, 1, 4).unbind(0)  # each (B, H, T, K)
        bias = None
        if memory_padding_mask is not None:
            bias = torch.zeros(memory_padding_mask.shape, dtype=q.dtype, device=q.device)  # (B, T)
            bias = bias.masked_fill(memory_padding_mask, torch.finfo(q.dtype).min)[:, None, None, :]
        context = F.scaled_dot_product_attention(
            q, k, v, attn_mask=bias, dropout_p=self.dropout if self.training else 0.0
        )  # (B, H, U, K)
        return self.out_proj(context.transpose(1, 2).reshape(batch, length, d_model))  # (B, U, D)
