"""Changing the frame rate: the 4x convolutional front end, and the 2x time reduce/recover pair.

Every strided layer here uses kernel k, stride 2 and symmetric padding (k-1)/2, so output frame j is
centred on input frame 2j and

    T_out = floor((T + 2 * (k-1)/2 - k) / 2) + 1 = floor((T - 1) / 2) + 1 = ceil(T / 2)

for any odd k. Output frame j is a real frame exactly when its centre 2j is one (2j < L), i.e. for
j < ceil(L / 2): lengths follow the same formula as tensor sizes, with no off-by-one at odd lengths. Padded
frames are zeroed before every conv (masks.py), so the last real output frame sees the same zeros an
unpadded example gets from the conv's own padding.

Dimension legend: B batch, T frames, F feature bins, C channels, D model width.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from asr_pipeline.modules.masks import mask_padded_frames, padding_mask


def halved_length(lengths: Tensor) -> Tensor:
    """ceil(L / 2): frames left after one centred stride-2 conv (see the module docstring)."""
    return torch.div(lengths + 1, 2, rounding_mode="floor")


class DepthwiseSeparableConvSubsampling(nn.Module):
    """Two stride-2 3x3 convs over (time, frequency), then a Linear to d_model: 4x fewer frames.

    Squeezeformer (Kim et al., 2022, §3.2.3) keeps Conformer's first full conv (it has one input channel,
    so it is cheap) but makes the second one depthwise-separable (depthwise 3x3 + pointwise 1x1); that
    conv was a sizable share of the model's FLOPs and the change costs no accuracy. ReLU follows each conv,
    as in the official code.
    """

    def __init__(self, input_dim: int, channels: int, d_model: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, channels, kernel_size=3, stride=2, padding=1)
        self.depthwise = nn.Conv2d(channels, channels, kernel_size=3, stride=2, padding=1, groups=channels)
        self.pointwise = nn.Conv2d(channels, channels, kernel_size=1)
        self.activation = nn.ReLU()
        reduced_bins = (input_dim + 3) // 4  # ceil(ceil(F / 2) / 2), the same arithmetic as time
        self.linear = nn.Linear(channels * reduced_bins, d_model)

    @staticmethod
    def output_lengths(lengths: Tensor) -> Tensor:
        """ceil(ceil(L / 2) / 2) = ceil(L / 4)."""
        return halved_length(halved_length(lengths))

    def forward(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """features: (B, T, F); lengths: (B,). Returns (B, ceil(T/4), D) and the (B,) output lengths."""
        x = mask_padded_frames(features, padding_mask(lengths, features.size(1)))  # (B, T, F)
        x = self.activation(self.conv(x.unsqueeze(1)))  # (B, C, T/2, F/2)
        half_lengths = halved_length(lengths)
        x = mask_padded_frames(x.transpose(1, 2), padding_mask(half_lengths, x.size(2)))  # (B, T/2, C, F/2)
        x = self.activation(self.pointwise(self.depthwise(x.transpose(1, 2))))  # (B, C, T/4, F/4)
        x = self.linear(x.transpose(1, 2).flatten(2))  # (B, T/4, C * F/4) -> (B, T/4, D)
        return x, halved_length(half_lengths)


class TimeReduction(nn.Module):
    """Temporal U-Net downsampling (Kim et al., 2022, §3.1.1): depthwise conv with stride 2, then pointwise.

    The paper found neighbouring frames in deep Conformer layers ~95 % similar, so the middle blocks run
    at half the frame rate (80 ms) and attention there costs a quarter. Kernel 5 as in the official code.
    """

    def __init__(self, d_model: int, kernel_size: int = 5) -> None:
        super().__init__()
        if kernel_size % 2 != 1:
            raise ValueError(f"kernel_size must be odd so output frame j is centred on 2j, got {kernel_size}")
        self.depthwise = nn.Conv1d(
            d_model, d_model, kernel_size, stride=2, padding=kernel_size // 2, groups=d_model
        )
        self.pointwise = nn.Linear(d_model, d_model)  # a 1x1 conv on (B, T, D)

    @staticmethod
    def output_lengths(lengths: Tensor) -> Tensor:
        return halved_length(lengths)

    def forward(self, x: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """x: (B, T, D); lengths: (B,). Returns (B, ceil(T/2), D) and ceil(lengths / 2)."""
        x = mask_padded_frames(x, padding_mask(lengths, x.size(1)))
        x = self.depthwise(x.transpose(1, 2)).transpose(1, 2)  # (B, T/2, D)
        return self.pointwise(x), halved_length(lengths)


class TimeRecovery(nn.Module):
    """Temporal U-Net upsampling (Kim et al., 2022, §3.1.1): repeat each frame twice, project, add the skip.

    The skip is the activation saved just before TimeReduction; it restores the fine time resolution
    CTC needs for alignment, which downsampling alone lost (the paper's reason for the U-Net shape).
    """

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.linear = nn.Linear(d_model, d_model)

    def forward(self, x: Tensor, skip: Tensor) -> Tensor:
        """x: (B, ceil(T/2), D); skip: (B, T, D). Returns (B, T, D); lengths are the skip's again."""
        upsampled = x.repeat_interleave(2, dim=1)[:, : skip.size(1)]  # (B, T, D); drops the odd extra frame
        return skip + self.linear(upsampled)
