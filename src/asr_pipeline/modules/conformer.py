"""The Conformer block (Gulati et al., 2020, "Conformer: Convolution-augmented Transformer for Speech
Recognition", §2.1):

    x = x + 1/2 FFN(LN(x))        Macaron half-step feed-forward
    x = x + MHSA(LN(x))           relative-position self-attention (attention.py)
    x = x + Conv(LN(x))           GLU-gated convolution module (convolution.py)
    x = x + 1/2 FFN(LN(x))
    y = LN(x)

Each residual sum also zeroes the padded frames (asr_kernels' ResidualAddMaskTime), so a padded batch
computes what each utterance computes alone. Paraformer's encoder stacks these blocks.

Dimension legend: B batch, T frames, D model width.
"""

from __future__ import annotations

from torch import Tensor, nn

from asr_kernels.residual_add_mask import residual_add_mask_time
from asr_pipeline.modules.attention import RelPositionMultiHeadAttention
from asr_pipeline.modules.convolution import ConvolutionModule
from asr_pipeline.modules.feed_forward import FeedForward


class ConformerBlock(nn.Module):
    def __init__(
        self, d_model: int, num_heads: int, ff_expansion: int, conv_kernel_size: int, dropout: float
    ) -> None:
        super().__init__()
        self.ff_in_norm, self.ff_in = nn.LayerNorm(d_model), FeedForward(d_model, ff_expansion, dropout)
        self.attention_norm = nn.LayerNorm(d_model)
        self.attention = RelPositionMultiHeadAttention(d_model, num_heads, dropout)
        self.conv_norm = nn.LayerNorm(d_model)
        self.conv = ConvolutionModule(d_model, conv_kernel_size, expansion=2, use_glu=True)
        self.ff_out_norm, self.ff_out = nn.LayerNorm(d_model), FeedForward(d_model, ff_expansion, dropout)
        self.output_norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, pos_emb: Tensor, lengths: Tensor, mask: Tensor) -> Tensor:
        """x: (B, T, D); pos_emb: (2T-1, D); lengths: (B,) real frames; mask: (B, T) True at padding."""
        x = self._add(x, self.ff_in(self.ff_in_norm(x)), lengths, 0.5)
        x = self._add(x, self.attention(self.attention_norm(x), pos_emb, mask), lengths)
        x = self._add(x, self.conv(self.conv_norm(x), lengths), lengths)
        x = self._add(x, self.ff_out(self.ff_out_norm(x)), lengths, 0.5)
        return self.output_norm(x)  # (B, T, D)

    def _add(self, x: Tensor, branch: Tensor, lengths: Tensor, scale: float = 1.0) -> Tensor:
        return residual_add_mask_time(x, self.dropout(branch), lengths, scale)
