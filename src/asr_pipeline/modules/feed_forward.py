"""Position-wise feed-forward module: Linear -> Swish -> Dropout -> Linear.

The Transformer FFN (Vaswani et al., 2017) with the Swish activation Conformer (Gulati et al., 2020) and
Squeezeformer (Kim et al., 2022) use. Normalisation and the residual connection belong to the block that
holds it, because models disagree about them (pre-LN in Conformer, scaled post-LN in Squeezeformer).

Dimension legend: B batch, T frames, D model width.
"""

from __future__ import annotations

from torch import Tensor, nn


class FeedForward(nn.Module):
    def __init__(self, d_model: int, expansion: int = 4, dropout: float = 0.1) -> None:
        super().__init__()
        self.linear_in = nn.Linear(d_model, expansion * d_model)
        self.activation = nn.SiLU()  # Swish with beta = 1
        self.dropout = nn.Dropout(dropout)
        self.linear_out = nn.Linear(expansion * d_model, d_model)

    def forward(self, x: Tensor) -> Tensor:
        hidden = self.dropout(self.activation(self.linear_in(x)))  # (B, T, expansion * D)
        return self.linear_out(hidden)  # (B, T, D)
