"""The Conformer convolution module and its Squeezeformer simplification.

    pointwise conv (D -> expansion * D) -> gate -> depthwise conv -> BatchNorm -> Swish -> pointwise conv (-> D)

Conformer (Gulati et al., 2020, §2.2) gates with a GLU, which halves the expanded channels back to D before
the depthwise conv. Squeezeformer (Kim et al., 2022, §3.2.1 "unified activations") replaces that GLU with
the Swish used everywhere else, so the depthwise conv, BatchNorm and second pointwise conv run on all
``expansion * D`` channels; the official configs set ``conv_use_glu: false`` with ``expansion = 2``, and
that width is what makes the paper's parameter counts come out (about +0.4 M on Squeezeformer-XS).

Normalisation and the residual belong to the block that holds this module.

Dimension legend: B batch, T frames, D model width, C inner channels.
"""

from __future__ import annotations

from torch import Tensor, nn

from asr_kernels import GLU
from asr_kernels.mask_time import mask_channel_time
from asr_pipeline.modules.widening import mark_fused_linear


class ConvolutionModule(nn.Module):
    def __init__(
        self,
        d_model: int,
        kernel_size: int = 31,
        expansion: int = 2,
        use_glu: bool = False,
    ) -> None:
        super().__init__()
        if kernel_size % 2 != 1:
            raise ValueError(f"kernel_size must be odd so the depthwise conv is centred, got {kernel_size}")
        expanded = expansion * d_model
        if use_glu and expanded % 2:
            raise ValueError(f"GLU needs an even number of channels, got expansion * d_model = {expanded}")
        channels = expanded // 2 if use_glu else expanded
        # A pointwise (1x1) conv is a Linear on (B, T, D); the Linear form skips two transposes.
        self.pointwise_in = nn.Linear(d_model, expanded)
        if use_glu:  # the GLU's two halves (modules.widening)
            mark_fused_linear(self.pointwise_in, (1, 1))
        # The GLU routes through our fused Triton kernel on CUDA (asr_kernels/glu.py) and falls back to
        # PyTorch elsewhere; both give the same values (tests/kernels/test_glu.py).
        self.gate = GLU(dim=-1) if use_glu else nn.SiLU()
        self.depthwise = nn.Conv1d(channels, channels, kernel_size, padding=kernel_size // 2, groups=channels)
        self.norm = nn.BatchNorm1d(channels)
        self.activation = nn.SiLU()
        self.pointwise_out = nn.Linear(channels, d_model)

    def forward(self, x: Tensor, lengths: Tensor | None = None) -> Tensor:
        """x: (B, T, D); lengths: (B,) real frames (None: no padding). Returns (B, T, D)."""
        hidden = self.gate(self.pointwise_in(x)).transpose(1, 2)  # (B, C, T)
        # Padded frames must be zero before the depthwise conv reaches across them (see masks.py).
        if lengths is not None:
            hidden = mask_channel_time(hidden, lengths)
        hidden = self.depthwise(hidden)  # (B, C, T)
        # BatchNorm in training mode also counts padded frames in its batch statistics, as Conformer and
        # Squeezeformer do; in eval mode it is a per-channel affine map and padding cannot leak.
        hidden = self.activation(self.norm(hidden)).transpose(1, 2)  # (B, T, C)
        return self.pointwise_out(hidden)  # (B, T, D)
