"""Zipformer's frame-rate changes (icefall ``zipformer/subsampling.py`` and ``zipformer.py``): the
Conv2dSubsampling front end from 100 Hz fbank to 50 Hz, the learned downsampling into a stack and the
repeat-upsampling out of it.

Front end, with 10 ms input frames (valid convs in time, so no output frame sees past an utterance's end):

    conv 3x3, stride 1        T -> T - 2
    conv 3x3, stride 2        -> (T - 2 - 3) // 2 + 1 = (T - 3) // 2
    conv 3x3, stride (1, 2)   -> (T - 3) // 2 - 2 = (T - 7) // 2          (20 ms)
    ConvNeXt 7x7, 'same'      unchanged

so an utterance needs at least 9 frames (90 ms) for one output frame. Frequency: F -> F -> (F-1)//2 ->
((F-1)//2 - 1)//2 bins (80 -> 80 -> 39 -> 19).

Dimension legend: B batch, T frames, F feature bins, C channels, D width.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from asr_kernels.swoosh import Swoosh
from asr_pipeline.modules.masks import mask_padded_frames, padding_mask
from asr_pipeline.modules.zipformer_blocks import BiasNorm

MIN_INPUT_FRAMES = 9  # (9 - 7) // 2 = 1 frame at 50 Hz


def embed_output_lengths(lengths: Tensor) -> Tensor:
    """(L - 7) // 2: 50 Hz frames from L 100 Hz frames (see the module docstring); none, not fewer, from
    L < 9."""
    return torch.div(lengths - 7, 2, rounding_mode="floor").clamp(min=0)


def downsampled_lengths(lengths: Tensor, factor: int) -> Tensor:
    """ceil(L / factor): frame j of a downsampled stack is real when its first input frame j * factor is."""
    return torch.div(lengths + factor - 1, factor, rounding_mode="floor")


class ConvNeXt(nn.Module):
    """Depthwise 7x7 -> pointwise to 3C -> SwooshL -> pointwise back, plus the residual (icefall's ConvNeXt,
    after Liu et al., 2022), over (time, frequency) at 50 Hz."""

    def __init__(
        self, channels: int, activation: nn.Module, hidden_ratio: int = 3, kernel_size: int = 7
    ) -> None:
        super().__init__()
        self.depthwise_conv = nn.Conv2d(
            channels, channels, kernel_size, padding=kernel_size // 2, groups=channels
        )
        self.pointwise_conv1 = nn.Conv2d(channels, channels * hidden_ratio, kernel_size=1)
        self.activation = activation
        self.pointwise_conv2 = nn.Conv2d(channels * hidden_ratio, channels, kernel_size=1)
        with torch.no_grad():  # icefall's ScaledConv2d(initial_scale=0.01): start as the identity
            self.pointwise_conv2.weight.mul_(0.01)
            self.pointwise_conv2.bias.mul_(0.01)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        """x: (B, C, T, F); mask: (B, T). Padded frames are zeroed first: the 7-frame kernel would
        otherwise read them into the last 3 real frames."""
        x = mask_padded_frames(x.transpose(1, 2), mask).transpose(1, 2)  # (B, C, T, F)
        return x + self.pointwise_conv2(self.activation(self.pointwise_conv1(self.depthwise_conv(x))))


class Conv2dSubsampling(nn.Module):
    """(B, T, F) fbank at 100 Hz -> (B, (T-7)//2, D) at 50 Hz (icefall's ``encoder_embed``).

    Three small convs with SwooshR (channels 8, 32, 128 in icefall), one ConvNeXt block, a Linear from
    C x F' to the first stack's width, BiasNorm and dropout.
    """

    def __init__(
        self,
        input_dim: int,
        output_dim: int,
        channels: tuple[int, int, int],
        dropout: float,
        swoosh_form: str = "paper",
    ) -> None:
        super().__init__()
        if input_dim < 7:
            raise ValueError(f"Conv2dSubsampling needs at least 7 feature bins, got input_dim={input_dim}")
        c1, c2, c3 = channels
        self.conv = nn.Sequential(
            nn.Conv2d(1, c1, kernel_size=3, padding=(0, 1)),  # (time, freq) padding
            Swoosh("r", swoosh_form),
            nn.Conv2d(c1, c2, kernel_size=3, stride=2),
            Swoosh("r", swoosh_form),
            nn.Conv2d(c2, c3, kernel_size=3, stride=(1, 2)),
            Swoosh("r", swoosh_form),
        )
        self.convnext = ConvNeXt(c3, Swoosh("l", swoosh_form))
        self.out_width = ((input_dim - 1) // 2 - 1) // 2  # F': 80 -> 19
        self.out = nn.Linear(c3 * self.out_width, output_dim)
        self.out_norm = BiasNorm(output_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """features: (B, T, F) with T >= 9; lengths: (B,). Returns (B, (T-7)//2, D) and (L-7)//2."""
        x = self.conv(features.unsqueeze(1))  # (B, C, (T-7)//2, F')
        out_lengths = embed_output_lengths(lengths)
        x = self.convnext(x, padding_mask(out_lengths, x.size(2)))
        x = self.out(x.transpose(1, 2).flatten(2))  # (B, T', C * F') -> (B, T', D)
        return self.dropout(self.out_norm(x)), out_lengths


def upsample(x: Tensor, factor: int, num_frames: int) -> Tensor:
    """(B, T/f, D) -> (B, T, D): each frame repeated ``factor`` times, cut to ``num_frames`` (icefall's
    SimpleUpsample)."""
    return x.repeat_interleave(factor, dim=1)[:, :num_frames]


def convert_num_channels(x: Tensor, num_channels: int) -> Tensor:
    """Cut (B, T, D) to its first ``num_channels`` channels, or pad with zero channels up to it (icefall):
    how a narrower stack reads a wider one's output and vice versa."""
    if num_channels <= x.size(-1):
        return x[..., :num_channels]
    return torch.nn.functional.pad(x, (0, num_channels - x.size(-1)))
