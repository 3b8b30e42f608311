"""Squeezeformer-CTC (Kim et al., 2022, "Squeezeformer: An Efficient Transformer for Automatic Speech
Recognition", arXiv:2206.00888).

What changes relative to Conformer, and where it lives:

    macro  Temporal U-Net: blocks [reduce, recover) run at half the frame rate     -> Squeezeformer.forward
           MF/CF blocks: MHSA -> FFN -> Conv -> FFN, no Macaron half-steps         -> SqueezeformerBlock
    micro  Swish instead of GLU in the conv module                                 -> modules/convolution.py
           post-LN only, the pre-LN replaced by a learned scale and bias           -> ScaledResidual
           depthwise-separable second conv in the 4x subsampling                   -> modules/subsampling.py

Frame rates with 10 ms features: 40 ms after subsampling, 80 ms between the time reduce and recover
points, 40 ms again at the output. Like the official configs, the reduction sits *before* block
``time_reduce_idx`` (so with 16 blocks and index 7, "after the 7th block") and the recovery before block
``time_recover_idx``; the rule the paper's sizes follow is ``paper_time_indices(num_layers)``.

Dimension legend: B batch, T input frames, F feature bins, T' output frames, D d_model, V vocabulary.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from asr_kernels.residual_add_mask import residual_add_mask_time
from asr_pipeline.models.squeezeformer_spec import (  # the config and sizes live in the torch-free spec
    SIZES,
    SqueezeformerConfig,
    paper_time_indices,
    squeezeformer_config,
)
from asr_pipeline.modules.attention import RelativePositionalEncoding, RelPositionMultiHeadAttention
from asr_pipeline.modules.convolution import ConvolutionModule
from asr_pipeline.modules.feed_forward import FeedForward
from asr_pipeline.modules.masks import normalize_input, padding_mask
from asr_pipeline.modules.subsampling import DepthwiseSeparableConvSubsampling, TimeRecovery, TimeReduction


class ScaledResidual(nn.Module):
    """x -> LayerNorm(x + Dropout(module(scale * x + bias))), Kim et al. §3.2.2.

    Conformer's pre-LN followed the previous module's post-LN: two LayerNorms back to back. Squeezeformer
    keeps the post-LN and swaps the pre-LN for a learned per-channel scale and bias (initialised to the
    identity), which the paper found as accurate and cheaper; the residual adds the unscaled input.
    """

    def __init__(self, module: nn.Module, d_model: int, dropout: float) -> None:
        super().__init__()
        self.module = module
        self.scale = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
        self.dropout = nn.Dropout(dropout)
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x: Tensor, lengths: Tensor, *args: Tensor | None) -> Tensor:
        """x: (B, T, D); lengths: (B,) real frames; ``args`` go to the module after its input. The residual
        sum zeroes padded frames in the same kernel (asr_kernels' ResidualAddMaskTime)."""
        branch = self.dropout(self.module(x * self.scale + self.bias, *args))
        return self.norm(residual_add_mask_time(x, branch, lengths))  # (B, T, D)


class SqueezeformerBlock(nn.Module):
    """MF then CF (Kim et al. §3.1.2): attention and convolution each followed by a full FFN, in the
    Transformer's order, instead of Conformer's FFN/2 -> MHSA -> Conv -> FFN/2 Macaron sandwich."""

    def __init__(self, config: SqueezeformerConfig) -> None:
        super().__init__()
        d, p = config.d_model, config.dropout
        self.attention = ScaledResidual(RelPositionMultiHeadAttention(d, config.num_heads, p), d, p)
        self.attention_ff = ScaledResidual(FeedForward(d, config.ff_expansion, p), d, p)
        conv = ConvolutionModule(d, config.conv_kernel_size, config.conv_expansion, config.conv_use_glu)
        self.conv = ScaledResidual(conv, d, p)
        self.conv_ff = ScaledResidual(FeedForward(d, config.ff_expansion, p), d, p)

    def forward(self, x: Tensor, pos_emb: Tensor, lengths: Tensor) -> Tensor:
        """x: (B, T, D); pos_emb: (2T-1, D); lengths: (B,) real frames."""
        mask = padding_mask(lengths, x.size(1))  # (B, T) key padding for the attention
        x = self.attention_ff(self.attention(x, lengths, pos_emb, mask), lengths)
        return self.conv_ff(self.conv(x, lengths, lengths), lengths)


class Squeezeformer(nn.Module):
    def __init__(
        self,
        config: SqueezeformerConfig,
        subsampling: nn.Module,
        blocks: nn.ModuleList,
        time_reduction: nn.Module | None,
        time_recovery: nn.Module | None,
    ) -> None:
        super().__init__()
        self.config = config
        self.subsampling = subsampling
        self.input_dropout = nn.Dropout(config.dropout)
        # The blocks end in post-LN, so each expects a normalised input; the first one gets it here.
        self.input_norm = nn.LayerNorm(config.d_model)
        self.positions = RelativePositionalEncoding(config.d_model)
        self.blocks = blocks
        self.time_reduction = time_reduction
        self.time_recovery = time_recovery
        self.output = nn.Linear(config.d_model, config.vocab_size)

    def output_lengths(self, feature_lengths: Tensor) -> Tensor:
        lengths = DepthwiseSeparableConvSubsampling.output_lengths(feature_lengths)
        return lengths if self.config.downsampling == 4 else TimeReduction.output_lengths(lengths)

    def forward(self, features: Tensor, feature_lengths: Tensor) -> tuple[Tensor, Tensor]:
        """features: (B, T, F) float; feature_lengths: (B,) int64.
        Returns CTC log-probabilities (B, T', V) and their (B,) lengths; frames past a length are padding."""
        if features.dim() != 3 or features.size(-1) != self.config.input_dim:
            raise ValueError(
                f"expected features of shape (B, T, {self.config.input_dim}), got {tuple(features.shape)}; "
                "check that the feature extractor and the model config agree on input_dim"
            )
        features = normalize_input(features, feature_lengths, self.config.input_normalization)  # (B, T, F)
        x, lengths = self.subsampling(features, feature_lengths)  # (B, T/4, D)
        x = self.input_norm(self.input_dropout(x))
        pos_emb = self.positions(x.size(1))
        skip = None
        for index, block in enumerate(self.blocks):
            if index == self.config.time_reduce_idx:
                skip = (x, lengths, pos_emb)
                x, lengths = self.time_reduction(x, lengths)  # (B, T/8, D)
                pos_emb = self.positions(x.size(1))
            if index == self.config.time_recover_idx:
                skip_x, lengths, pos_emb = skip
                x = self.time_recovery(x, skip_x)  # (B, T/4, D)
            x = block(x, pos_emb, lengths)
        # float32 log-probs even under bf16/fp16 autocast: CTC sums probabilities over many alignments.
        return self.output(x).float().log_softmax(dim=-1), lengths  # (B, T', V), (B,)


def build_squeezeformer(config: SqueezeformerConfig) -> Squeezeformer:
    """Assemble a Squeezeformer from its blocks; every named size below is this with other numbers."""
    d = config.d_model
    unet = config.time_reduce_idx is not None
    return Squeezeformer(
        config,
        subsampling=DepthwiseSeparableConvSubsampling(config.input_dim, config.subsampling_channels or d, d),
        blocks=nn.ModuleList(SqueezeformerBlock(config) for _ in range(config.num_layers)),
        time_reduction=TimeReduction(d) if unet else None,
        time_recovery=TimeRecovery(d) if config.time_recover_idx is not None else None,
    )


def squeezeformer_xs(**overrides: object) -> Squeezeformer:
    return build_squeezeformer(squeezeformer_config("xs", **overrides))


def squeezeformer_s(**overrides: object) -> Squeezeformer:
    return build_squeezeformer(squeezeformer_config("s", **overrides))


def squeezeformer_sm(**overrides: object) -> Squeezeformer:
    return build_squeezeformer(squeezeformer_config("sm", **overrides))


def squeezeformer_m(**overrides: object) -> Squeezeformer:
    return build_squeezeformer(squeezeformer_config("m", **overrides))


def squeezeformer_ml(**overrides: object) -> Squeezeformer:
    return build_squeezeformer(squeezeformer_config("ml", **overrides))


def squeezeformer_l(**overrides: object) -> Squeezeformer:
    return build_squeezeformer(squeezeformer_config("l", **overrides))


def squeezeformer_tiny(**overrides: object) -> Squeezeformer:
    return build_squeezeformer(squeezeformer_config("tiny", **overrides))


def squeezeformer_demo(**overrides: object) -> Squeezeformer:
    return build_squeezeformer(squeezeformer_config("demo", **overrides))


__all__ = [  # the config and sizes are models.squeezeformer_spec's, re-exported for the model's users
    "SIZES",
    "ScaledResidual",
    "Squeezeformer",
    "SqueezeformerBlock",
    "SqueezeformerConfig",
    "build_squeezeformer",
    "paper_time_indices",
    "squeezeformer_config",
    "squeezeformer_demo",
    "squeezeformer_l",
    "squeezeformer_m",
    "squeezeformer_ml",
    "squeezeformer_s",
    "squeezeformer_sm",
    "squeezeformer_tiny",
    "squeezeformer_xs",
]
