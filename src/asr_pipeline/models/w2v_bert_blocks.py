"""W2V-BERT 2.0's blocks (``models.w2v_bert`` assembles them): the feature projection, the feed-forward and
convolution modules, self-attention with HF's position schemes (relative_key, relative, rotary), the conformer
layer and the adapter layer, each under ``Wav2Vec2BertModel``'s module names so its state dict loads 1:1.

Dimension legend: B batch, T frames (20 ms), D d_model (or the adapter's width), H heads, K = D / H head
width, I the feed-forward's inner width, T' the adapter's output frames.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention.flex_attention import flex_attention

from asr_kernels.glu import glu
from asr_kernels.mask_time import mask_time
from asr_kernels.masks import attention_mask_4d
from asr_kernels.residual_add_mask import residual_add_mask_time
from asr_pipeline.models.w2v_bert_spec import W2VBertConfig
from asr_pipeline.modules.attention import relative_shift
from asr_pipeline.modules.widening import mark_fused_linear

# HF's ACT2FN names we implement (gelu_new is the tanh approximation, as is gelu_pytorch_tanh): the
# spec's ACTIVATION_NAMES, which the config checks without torch (tests/models/test_w2v_bert.py: equal).
ACTIVATIONS = {
    "relu": nn.ReLU,
    "gelu": nn.GELU,
    "gelu_new": lambda: nn.GELU(approximate="tanh"),
    "gelu_pytorch_tanh": lambda: nn.GELU(approximate="tanh"),
    "swish": nn.SiLU,
    "silu": nn.SiLU,
    "mish": nn.Mish,
    "tanh": nn.Tanh,
    "sigmoid": nn.Sigmoid,
}

# A padded key's score in the fused relative_key attention (at most, in float16: its finfo.min): finite after
# FlexAttention's x log2(e), so a fully padded row (a zero-length example) averages in the forward, as SDPA's
# finfo.min mask makes the dense path do. (Its backward differs there, harmlessly: the padded frames' gradient
# is zeroed by the residual's mask.)
MASKED_SCORE = -1e30


def adapter_output_lengths(lengths: Tensor, kernel_size: int, stride: int) -> Tensor:
    """Conv1d arithmetic with padding stride // 2: floor((L + 2 * (stride // 2) - kernel) / stride) + 1."""
    return torch.div(lengths + 2 * (stride // 2) - kernel_size, stride, rounding_mode="floor") + 1


class FeatureProjection(nn.Module):
    def __init__(self, config: W2VBertConfig) -> None:
        super().__init__()
        self.layer_norm = nn.LayerNorm(config.input_dim, eps=config.layer_norm_eps)
        self.projection = nn.Linear(config.input_dim, config.d_model)
        self.dropout = nn.Dropout(config.rate("feat_proj_dropout"))

    def forward(self, features: Tensor) -> Tensor:
        return self.dropout(self.projection(self.layer_norm(features)))  # (B, T, D)


class FeedForward(nn.Module):
    def __init__(self, config: W2VBertConfig, width: int, activation: str) -> None:
        super().__init__()
        self.intermediate_dense = nn.Linear(width, config.intermediate_size)
        self.intermediate_act_fn = ACTIVATIONS[activation]()
        self.intermediate_dropout = nn.Dropout(config.rate("activation_dropout"))
        self.output_dense = nn.Linear(config.intermediate_size, width)
        self.output_dropout = nn.Dropout(config.rate("hidden_dropout"))

    def forward(self, x: Tensor) -> Tensor:
        hidden = self.intermediate_dropout(self.intermediate_act_fn(self.intermediate_dense(x)))  # (B, T, I)
        return self.output_dropout(self.output_dense(hidden))  # (B, T, D)


class RotaryEmbedding(nn.Module):
    """cos and sin of t * base^(-2i/K) for positions t = 0..T-1, each frequency twice (Su et al., 2021)."""

    def __init__(self, head_size: int, base: int) -> None:
        super().__init__()
        inv_freq = 1.0 / base ** (torch.arange(0, head_size, 2, dtype=torch.float32) / head_size)
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # (K/2,)

    def forward(self, length: int) -> tuple[Tensor, Tensor]:
        angles = torch.arange(length, device=self.inv_freq.device).float()[:, None] * self.inv_freq
        angles = torch.cat((angles, angles), dim=-1)[:, None, :]  # (T, 1, K)
        return angles.cos(), angles.sin()


def rotate(x: Tensor, cos: Tensor, sin: Tensor, num_heads: int) -> Tensor:
    """Rotary positions on (B, T, D) viewed as heads; like HF, applied to the attention *input*."""
    heads = x.unflatten(-1, (num_heads, -1))  # (B, T, H, K)
    first, second = heads.chunk(2, dim=-1)
    rotated = heads * cos.to(x.dtype) + torch.cat((-second, first), dim=-1) * sin.to(x.dtype)
    return rotated.flatten(-2)  # (B, T, D)


class SelfAttention(nn.Module):
    """Multi-head self-attention with one of HF's position schemes (``position_embeddings_type``)."""

    def __init__(self, config: W2VBertConfig, width: int, position_embeddings_type: str | None) -> None:
        super().__init__()
        self.num_heads, self.head_size = config.num_heads, width // config.num_heads
        self.scaling = self.head_size**-0.5
        self.position_embeddings_type = position_embeddings_type
        self.dropout = config.rate("attention_dropout")
        self.linear_q = nn.Linear(width, width)
        self.linear_k = nn.Linear(width, width)
        self.linear_v = nn.Linear(width, width)
        self.linear_out = nn.Linear(width, width)
        if position_embeddings_type == "relative":  # Transformer-XL (Dai et al., 2019, §3.3)
            self.linear_pos = nn.Linear(width, width, bias=False)
            self.pos_bias_u = nn.Parameter(torch.empty(self.num_heads, self.head_size))
            self.pos_bias_v = nn.Parameter(torch.empty(self.num_heads, self.head_size))
            nn.init.xavier_uniform_(self.pos_bias_u)  # as HF initialises them
            nn.init.xavier_uniform_(self.pos_bias_v)
        if position_embeddings_type == "relative_key":  # Shaw et al., 2018: one vector per clipped distance
            self.left, self.right = config.left_max_position_embeddings, config.right_max_position_embeddings
            self.distance_embedding = nn.Embedding(self.left + self.right + 1, self.head_size)
            self.relative_key_attention = config.relative_key_attention

    def forward(self, x: Tensor, lengths: Tensor, positions: Tensor | tuple[Tensor, Tensor] | None) -> Tensor:
        """x: (B, T, D); lengths: (B,) real frames; positions: rotary (cos, sin), relative sinusoids (2T-1, D),
        otherwise None. Returns (B, T, D)."""
        length = x.size(1)
        query_key_input = x
        if self.position_embeddings_type == "rotary":
            query_key_input = rotate(x, *positions, self.num_heads)
        q = self.linear_q(query_key_input).unflatten(-1, (self.num_heads, -1)).transpose(1, 2)  # (B, H, T, K)
        k = self.linear_k(query_key_input).unflatten(-1, (self.num_heads, -1)).transpose(1, 2)
        v = self.linear_v(x).unflatten(-1, (self.num_heads, -1)).transpose(1, 2)
        bias = None  # (B, H, T, T) position scores, already scaled like q·k
        if self.position_embeddings_type == "relative":
            p = self.linear_pos(positions.to(x.dtype)).unflatten(-1, (self.num_heads, -1)).transpose(0, 1)
            position_scores = (q + self.pos_bias_v[:, None, :]) @ p.transpose(-1, -2)  # (B, H, T, 2T-1)
            bias = relative_shift(position_scores) * self.scaling
            q = q + self.pos_bias_u[:, None, :]
        elif self.position_embeddings_type == "relative_key":
            # Scaled on q (B, H, T, K), not on the (B, H, T, T) gathered bias: one pass over T x T fewer.
            embedding = self.distance_embedding.weight.to(q.dtype)  # (L+R+1, K)
            per_distance = (q * self.scaling) @ embedding.T  # (B, H, T, L+R+1)
            if self.fused_relative_key(q):
                context = relative_key_flex_attention(
                    q, k, v, per_distance, lengths, (self.left, self.right), self.scaling
                )
                return self.linear_out(context.transpose(1, 2).flatten(2))  # (B, T, D)
            frames = torch.arange(length, device=x.device)
            distance = (frames[None, :] - frames[:, None]).clamp(-self.left, self.right) + self.left  # (T, T)
            bias = per_distance.gather(-1, distance.expand(*q.shape[:2], length, length))
        # Additive 0 / finfo.min over padded keys (finfo.min, not -inf: a fully padded row, a zero-length
        # example, averages instead of giving NaN), built from the lengths in one kernel (asr_kernels).
        key_mask = attention_mask_4d(lengths, length, 1, q.dtype)  # (B, 1, T, T)
        attn_mask = key_mask if bias is None else (bias.to(q.dtype) + key_mask)
        context = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, dropout_p=self.dropout if self.training else 0.0, scale=self.scaling
        )  # (B, H, T, K)
        return self.linear_out(context.transpose(1, 2).flatten(2))  # (B, T, D)

    def fused_relative_key(self, q: Tensor) -> bool:
        """Whether this call adds the relative_key scores inside FlexAttention (``relative_key_attention``
        'flex'): only inside torch.compile, which fuses it (eager FlexAttention builds the T x T scores), and
        where torch's kernel is sound (``flex_runs_here``)."""
        return self.relative_key_attention == "flex" and torch.compiler.is_compiling() and flex_runs_here(q)


def flex_runs_here(q: Tensor) -> bool:
    """Whether the fused relative_key attention runs for ``q``: on CUDA only. torch 2.11's compiled CPU
    FlexAttention has no backward, and without one it reads this score_mod's ``lengths[b]`` and
    ``per_distance[b, ...]`` wrongly for every example but the first (and fails to build for a second
    length): measured, the dense path is the CPU's."""
    return q.is_cuda


def relative_key_flex_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    per_distance: Tensor,
    lengths: Tensor,
    clip: tuple[int, int],
    scale: float,
) -> Tensor:
    """Attention whose score (l, r) is q_l·k_r·scale plus ``per_distance``[b, h, l, clamp(r - l, -left, right)
    + left], keys at or past each example's length masked: what SDPA over the gathered (B, H, T, T) bias and
    the key mask computes, with the bias read per score inside FlexAttention's kernel instead of built.

    q, k, v: (B, H, T, K); per_distance: (B, H, T, left + right + 1), already scaled like q·k; lengths: (B,)
    real frames; clip: (left, right). Returns (B, H, T, K)."""
    left, right = clip
    masked = max(MASKED_SCORE, torch.finfo(q.dtype).min)  # float16's range ends at -65504

    def score_mod(score: Tensor, b: Tensor, h: Tensor, query: Tensor, key: Tensor) -> Tensor:
        distance = torch.clamp(key - query, -left, right) + left
        return torch.where(key < lengths[b], score + per_distance[b, h, query, distance], masked)

    return flex_attention(q, k, v, score_mod=score_mod, scale=scale)


class ConvolutionModule(nn.Module):
    """LayerNorm -> pointwise conv + GLU -> causal depthwise conv -> LayerNorm -> act -> pointwise conv.

    Causal (all k-1 padding on the left), so a frame never sees the future; padded frames are zeroed
    after the first LayerNorm all the same, as HF does."""

    def __init__(self, config: W2VBertConfig) -> None:
        super().__init__()
        d, kernel = config.d_model, config.conv_depthwise_kernel_size
        self.layer_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.pointwise_conv1 = nn.Conv1d(d, 2 * d, kernel_size=1, bias=False)  # HF's weight shape (2D, D, 1)
        mark_fused_linear(self.pointwise_conv1, (1, 1))  # the GLU's halves (modules.widening)
        self.depthwise_conv = nn.Conv1d(d, d, kernel, groups=d, bias=False)
        self.depthwise_layer_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.activation = ACTIVATIONS[config.hidden_act]()
        self.pointwise_conv2 = nn.Conv1d(d, d, kernel_size=1, bias=False)
        self.dropout = nn.Dropout(config.rate("conformer_conv_dropout"))

    def forward(self, x: Tensor, lengths: Tensor) -> Tensor:
        x = mask_time(self.layer_norm(x), lengths)  # (B, T, D)
        # The pointwise conv as the Linear it is, channels last, so the GLU runs over the last dim (asr_kernels).
        x = glu(F.linear(x, self.pointwise_conv1.weight.squeeze(-1))).transpose(1, 2)  # (B, D, T)
        x = self.depthwise_conv(F.pad(x, (self.depthwise_conv.kernel_size[0] - 1, 0)))  # (B, D, T)
        x = self.activation(self.depthwise_layer_norm(x.transpose(1, 2)))  # (B, T, D)
        return self.dropout(self.pointwise_conv2(x.transpose(1, 2)).transpose(1, 2))  # (B, T, D)


class ConformerLayer(nn.Module):
    def __init__(self, config: W2VBertConfig) -> None:
        super().__init__()
        d, eps = config.d_model, config.layer_norm_eps
        self.ffn1_layer_norm = nn.LayerNorm(d, eps=eps)
        self.ffn1 = FeedForward(config, d, config.hidden_act)
        self.self_attn_layer_norm = nn.LayerNorm(d, eps=eps)
        self.self_attn = SelfAttention(config, d, config.position_embeddings_type)
        self.self_attn_dropout = nn.Dropout(config.rate("attention_dropout"))
        self.conv_module = ConvolutionModule(config)
        self.ffn2_layer_norm = nn.LayerNorm(d, eps=eps)
        self.ffn2 = FeedForward(config, d, config.hidden_act)
        self.final_layer_norm = nn.LayerNorm(d, eps=eps)

    def forward(self, x: Tensor, lengths: Tensor, positions: Tensor | tuple[Tensor, Tensor] | None) -> Tensor:
        """x: (B, T, D); lengths: (B,) real frames. Each residual sum zeroes padded frames (one kernel)."""

        def residual(x: Tensor, branch: Tensor, scale: float = 1.0) -> Tensor:
            return residual_add_mask_time(x, branch, lengths, scale)

        x = residual(x, self.ffn1(self.ffn1_layer_norm(x)), 0.5)
        x = residual(
            x, self.self_attn_dropout(self.self_attn(self.self_attn_layer_norm(x), lengths, positions))
        )
        x = residual(x, self.conv_module(x, lengths))
        x = residual(x, self.ffn2(self.ffn2_layer_norm(x)), 0.5)
        return self.final_layer_norm(x)  # (B, T, D)


class AdapterLayer(nn.Module):
    """Strided conv + GLU on both the residual and the attention branch, then attention and an FFN."""

    def __init__(self, config: W2VBertConfig) -> None:
        super().__init__()
        width, kernel, stride, eps = (
            config.adapter_width,
            config.adapter_kernel_size,
            config.adapter_stride,
            config.layer_norm_eps,
        )
        self.kernel_size, self.stride = kernel, stride
        self.residual_layer_norm = nn.LayerNorm(width, eps=eps)
        self.residual_conv = nn.Conv1d(width, 2 * width, kernel, stride=stride, padding=stride // 2)
        mark_fused_linear(self.residual_conv, (1, 1))  # GLU halves
        self.self_attn_layer_norm = nn.LayerNorm(width, eps=eps)
        self.self_attn_conv = nn.Conv1d(width, 2 * width, kernel, stride=stride, padding=stride // 2)
        mark_fused_linear(self.self_attn_conv, (1, 1))  # GLU halves
        self.self_attn = SelfAttention(config, width, position_embeddings_type=None)
        self.self_attn_dropout = nn.Dropout(config.rate("conformer_conv_dropout"))
        self.ffn_layer_norm = nn.LayerNorm(width, eps=eps)
        self.ffn = FeedForward(config, width, config.adapter_act)

    def forward(self, x: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        def pool(norm: nn.Module, conv: nn.Module) -> Tensor:  # (B, T, D) -> (B, T/stride, D), GLU last
            return glu(conv(mask_time(norm(x), lengths).transpose(1, 2)).transpose(1, 2))

        residual = pool(self.residual_layer_norm, self.residual_conv)
        hidden = pool(self.self_attn_layer_norm, self.self_attn_conv)
        lengths = adapter_output_lengths(lengths, self.kernel_size, self.stride)
        hidden = self.self_attn(hidden, lengths, None)
        x = self.self_attn_dropout(hidden) + residual
        return x + self.ffn(self.ffn_layer_norm(x)), lengths  # (B, T', D)


__all__ = [
    "ACTIVATIONS",
    "AdapterLayer",
    "ConformerLayer",
    "ConvolutionModule",
    "FeatureProjection",
    "FeedForward",
    "RotaryEmbedding",
    "SelfAttention",
    "adapter_output_lengths",
    "rotate",
]
