"""The parts of a Zipformer layer (Yao et al., 2023, §3; icefall ``zipformer/zipformer.py``, ``scaling.py``).

Parameter shapes follow icefall, so the named sizes have icefall's parameter counts. icefall's training-only
regularisers without parameters, Balancer and Whiten, are ``modules.activation_constraints`` (passed in,
``ZipformerConfig.activation_constraints``); its ScheduledFloat schedules are left out. ScaledLinear becomes an ``nn.Linear`` whose initial weights are
scaled down the same way (``scaled_linear``), and because plain Adam/AdamW does not learn the attention
temperature the way ScaledAdam's parameter-scale updates do, the query-key product is divided by
sqrt(query_head_dim) explicitly.

Dimension legend: B batch, T frames (at the stack's rate), D stack width, H heads, P pos_dim.
Masks follow ``modules/masks.py``: (B, T) bool, True at padding.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from asr_kernels import in_input_dtype
from asr_kernels.mask_time import mask_time
from asr_kernels.masks import attention_mask_4d
from asr_kernels.relative_shift import relative_shift
from asr_pipeline.modules.widening import mark_fused_linear


def scaled_linear(in_features: int, out_features: int, initial_scale: float, bias: bool = True) -> nn.Linear:
    """icefall's ScaledLinear: an ``nn.Linear`` with its default initial weights (and bias) times
    ``initial_scale``. Output projections of residual branches start small (0.05-0.1), so each layer
    starts near the identity and the branches grow as they learn."""
    linear = nn.Linear(in_features, out_features, bias=bias)
    with torch.no_grad():
        linear.weight.mul_(initial_scale)
        if linear.bias is not None:
            linear.bias.mul_(initial_scale)
    return linear


class BiasNorm(nn.Module):
    """x * exp(log_scale) / rms(x - bias) (Yao et al. §3.3), Zipformer's replacement for LayerNorm.

    icefall observed trained Transformers setting one channel to a large constant to defeat LayerNorm,
    which discards each frame's vector length. BiasNorm subtracts no mean from its output, so the length
    survives, and the learned bias lets such a constant channel exist without dominating the rms; the
    scalar log_scale is the output scale. Computed in float32 (a mean of squares over D channels); eps
    only guards an all-zero input.
    """

    def __init__(self, num_channels: int, eps: float = 1e-8) -> None:
        super().__init__()
        self.log_scale = nn.Parameter(torch.tensor(1.0))  # icefall's initial value: output rms e
        self.bias = nn.Parameter(torch.randn(num_channels) * 1e-4)
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        x32 = x.float()
        # x + (-bias), the values of x - bias: the backward negates the (D,) bias gradient, not a (B, T, D) one.
        mean_square = (x32 + -self.bias.float()).pow(2).mean(dim=-1, keepdim=True)  # (B, T, 1)
        return (x32 * torch.rsqrt(mean_square + self.eps) * self.log_scale.float().exp()).to(x.dtype)


class Bypass(nn.Module):
    """orig + scale * (x - orig) with a learned per-channel scale in [0.2, 1] (icefall's BypassModule).

    A layer (or a downsampled stack) can learn to pass part of its input straight through, per channel;
    the clamp is icefall's limit after warm-up, here applied in training and eval alike so both compute
    the same function. icefall also skips whole layers at random early in training; not done here.
    """

    def __init__(self, num_channels: int, scale_min: float = 0.2, scale_max: float = 1.0) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.full((num_channels,), 0.5))
        self.scale_min, self.scale_max = scale_min, scale_max

    def forward(self, orig: Tensor, x: Tensor) -> Tensor:
        return orig + (x - orig) * self.scale.clamp(self.scale_min, self.scale_max)  # (B, T, D)


def compact_relative_positions(num_frames: int, pos_dim: int, device: torch.device | None = None) -> Tensor:
    """icefall's CompactRelPositionalEncoding: (2T-1, P) embeddings of the offsets -(T-1) .. T-1.

    An offset o is compressed logarithmically and squashed by atan into a bounded interval before the
    Fourier features, so nearby offsets stay distinguishable (resolution ~1 frame up to ~sqrt(P)) while
    1000 and 1001 look alike: relative attention needs to tell 1 from 2 frames apart, not 1000 from 1001.
    The last channel is a constant 1 (a bias for the position projection). No parameters; an offset's
    embedding does not depend on T, so a padded batch sees the same values as each utterance alone.
    """
    offsets = torch.arange(-(num_frames - 1), num_frames, device=device, dtype=torch.float32)[:, None]
    compression = pos_dim**0.5
    compressed = compression * offsets.sign() * ((offsets.abs() + compression).log() - math.log(compression))
    angle = (compressed / (pos_dim / (2 * math.pi))).atan()  # (2T-1, 1), in (-pi/2, pi/2)
    freqs = torch.arange(1, pos_dim // 2 + 1, device=device, dtype=torch.float32)  # (P/2,)
    embedding = torch.zeros(2 * num_frames - 1, pos_dim, device=device)
    embedding[:, 0::2] = (angle * freqs).cos()
    embedding[:, 1::2] = (angle * freqs).sin()
    embedding[:, -1] = 1.0
    return embedding  # (2T-1, P)


class RelPositionAttentionWeights(nn.Module):
    """Multi-head attention *weights* with relative positions (icefall's RelPositionMultiheadAttentionWeights).

    Computed once per layer and shared by the layer's two SelfAttention modules and (head 0 only) its
    NonlinAttention (Yao et al. §3.2): attention costs one score matrix per layer instead of three.
    score(i, j) = q_i . k_j / sqrt(query_head_dim) + p_i . W pos(j - i), with a small positional query
    (pos_head_dim, 4 in icefall) per head.
    """

    def __init__(
        self, dim: int, pos_dim: int, num_heads: int, query_head_dim: int, pos_head_dim: int
    ) -> None:
        super().__init__()
        self.num_heads, self.query_head_dim, self.pos_head_dim = num_heads, query_head_dim, pos_head_dim
        self.in_proj = nn.Linear(dim, (2 * query_head_dim + pos_head_dim) * num_heads)
        mark_fused_linear(self.in_proj, (query_head_dim, query_head_dim, pos_head_dim))  # q, k, p
        self.linear_pos = scaled_linear(pos_dim, num_heads * pos_head_dim, 0.05, bias=False)

    def forward(self, x: Tensor, pos_emb: Tensor, lengths: Tensor) -> Tensor:
        """x: (B, T, D); pos_emb: (2T-1, P); lengths: (B,) real frames. Returns (B, H, T, T) weights; rows
        sum to 1 over the real frames, padded keys get weight exactly 0."""
        batch, frames, _ = x.shape
        heads, query_dim = self.num_heads, self.query_head_dim * self.num_heads
        projected = self.in_proj(x)  # (B, T, (2 dq + dp) H)
        # split, not three slices: its backward concatenates the three gradients, where each slice's would
        # fill a zero tensor of the projection's size and two more passes would add them up.
        q, k, p = (
            part.view(batch, frames, heads, -1).transpose(1, 2)  # (B, H, T, dq), (B, H, T, dq), (B, H, T, dp)
            for part in projected.split((query_dim, query_dim, self.pos_head_dim * heads), dim=-1)
        )
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.query_head_dim)  # (B, H, T, T)

        pos = self.linear_pos(pos_emb).view(2 * frames - 1, heads, -1).permute(1, 2, 0)  # (H, dp, 2T-1)
        pos_scores = torch.matmul(p, pos.unsqueeze(0))  # (B, H, T, 2T-1); index = offset + T-1
        scores = scores + self.shift_to_keys(pos_scores)
        # Additive 0 / finfo.min over padded keys (B, 1, T, T): a padded key's weight underflows to exactly 0,
        # and a zero-length example's row averages instead of giving NaN.
        scores = scores + attention_mask_4d(lengths, frames, 1, scores.dtype)
        # In the scores' dtype also under autocast (float32 inside, one rounding): the weights' consumers cast
        # them to bf16 for their matrix products anyway, so a float32 softmax only wrote and cast (B, H, T, T)
        # three more times per layer and saved twice the bytes for backward (bench_forward_bytes.py).
        return in_input_dtype(lambda s: s.softmax(dim=-1), scores)

    def shift_to_keys(self, pos_scores: Tensor) -> Tensor:
        """(B, H, T, 2T-1) positional scores per offset -> (B, H, T, T) per key frame.

        Row i, column j needs relative index (T-1) + j - i, i.e. offset j - i: the Transformer-XL shift's
        column T-1-i+j (asr_kernels.relative_shift; there the column means distance i - j, here offset j - i).
        A method of its own so that a variant can compute the same shift another way
        (benchmarks/bench_compile_training.py's ``gather``) and share the rest of ``forward``.
        """
        return relative_shift(pos_scores)


class SelfAttention(nn.Module):
    """Values and output projection over precomputed weights (icefall's SelfAttention)."""

    def __init__(self, dim: int, num_heads: int, value_head_dim: int) -> None:
        super().__init__()
        self.in_proj = nn.Linear(dim, num_heads * value_head_dim)
        self.out_proj = scaled_linear(num_heads * value_head_dim, dim, 0.05)

    def forward(self, x: Tensor, weights: Tensor) -> Tensor:
        """x: (B, T, D); weights: (B, H, T, T)."""
        batch, frames, _ = x.shape
        values = self.in_proj(x).view(batch, frames, weights.size(1), -1).transpose(1, 2)  # (B, H, T, dv)
        attended = torch.matmul(weights, values).transpose(1, 2).reshape(batch, frames, -1)  # (B, T, H dv)
        return self.out_proj(attended)  # (B, T, D)


class NonlinAttention(nn.Module):
    """A convolution module with the depthwise conv replaced by attention weights (Yao et al. §3.2):
    out = W_o((A (x * tanh(s))) * y), with s, x, y three projections of the input, hidden = 3D/4 wide, and
    A one head's attention weights."""

    def __init__(self, dim: int, hidden_dim: int) -> None:
        super().__init__()
        self.in_proj = nn.Linear(dim, 3 * hidden_dim)
        mark_fused_linear(self.in_proj, (1, 1, 1))  # gate, values, output gate
        self.out_proj = scaled_linear(hidden_dim, dim, 0.05)

    def forward(self, x: Tensor, weights: Tensor) -> Tensor:
        """x: (B, T, D); weights: (B, 1, T, T), head 0 of the layer's weights."""
        gate, values, out_gate = self.in_proj(x).chunk(3, dim=-1)  # 3 x (B, T, hidden)
        values = values * gate.tanh()
        attended = torch.matmul(weights[:, 0], values)  # (B, T, hidden)
        return self.out_proj(attended * out_gate)  # (B, T, D)


class FeedForward(nn.Module):
    """Linear -> [Balancer] -> SwooshL -> dropout -> Linear -> [Whiten] (icefall's FeedforwardModule; the
    gradient-only constraints when given, ``modules.activation_constraints``)."""

    def __init__(
        self,
        dim: int,
        hidden_dim: int,
        dropout: float,
        activation: nn.Module,
        hidden_balancer: nn.Module | None = None,
        out_whiten: nn.Module | None = None,
    ) -> None:
        super().__init__()
        self.in_proj = nn.Linear(dim, hidden_dim)
        self.hidden_balancer = hidden_balancer or nn.Identity()
        self.activation = activation
        self.dropout = nn.Dropout(dropout)
        self.out_proj = scaled_linear(hidden_dim, dim, 0.1)
        self.out_whiten = out_whiten or nn.Identity()

    def forward(self, x: Tensor) -> Tensor:
        hidden = self.hidden_balancer(self.in_proj(x))  # (B, T, hidden)
        return self.out_whiten(self.out_proj(self.dropout(self.activation(hidden))))  # (B, T, D)


class ConvolutionModule(nn.Module):
    """Linear to 2D -> GLU-style gate -> depthwise conv -> SwooshR -> Linear (icefall's ConvolutionModule).

    No BatchNorm: its batch statistics would depend on the padding, and Zipformer drops it anyway. Padded
    frames are zeroed before the depthwise conv so they read like the conv's own zero padding.
    """

    def __init__(self, dim: int, kernel_size: int, activation: nn.Module) -> None:
        super().__init__()
        if kernel_size % 2 != 1:
            raise ValueError(f"the convolution kernel must be odd ('same' padding), got {kernel_size}")
        self.in_proj = nn.Linear(dim, 2 * dim)
        mark_fused_linear(self.in_proj, (1, 1))  # values, gate
        self.depthwise_conv = nn.Conv1d(dim, dim, kernel_size, padding=kernel_size // 2, groups=dim)
        self.activation = activation
        self.out_proj = scaled_linear(dim, dim, 0.05)

    def forward(self, x: Tensor, lengths: Tensor) -> Tensor:
        """x: (B, T, D); lengths: (B,) real frames."""
        values, gate = self.in_proj(x).chunk(2, dim=-1)  # 2 x (B, T, D)
        x = mask_time(values * gate.sigmoid(), lengths)
        x = self.depthwise_conv(x.transpose(1, 2)).transpose(1, 2)  # (B, T, D)
        return self.out_proj(self.activation(x))
