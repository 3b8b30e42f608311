"""W2V-BERT 2.0 conformer CTC: the encoder of Hugging Face's ``Wav2Vec2BertModel`` with a CTC head. w2v-BERT:
Chung et al., 2021, arXiv:2108.06209; version 2.0, the 600M encoder of Seamless: Barrault et al., 2023,
arXiv:2312.05187.

Our own code, laid out so a ``Wav2Vec2BertForCTC`` state dict loads 1:1 (``W2VBertCTC.wav2vec2_bert`` holds
``Wav2Vec2BertModel``'s names, ``lm_head`` its head; ``models.w2v_bert_hf`` reads checkpoints):

    features (B, T, 160) -> feature_projection: LayerNorm -> Linear -> (B, T, D)
        -> [training: hidden-state SpecAugment with the learned masked_spec_embed]
        -> encoder: padding zeroed, num_layers conformer layers (Gulati et al., 2020), each
           x + FFN/2 -> x + MHSA -> x + Conv -> x + FFN/2 -> LayerNorm   (Macaron sandwich, pre-LN inside)
        -> [intermediate_ffn: x + FFN/2] -> [adapter: strided conv + attention layers] -> lm_head

Features arrive at 20 ms (two stacked 10 ms fbank frames, features/w2v_bert.py) and the encoder keeps that
rate; each adapter layer divides it by ``adapter_stride``. Where we differ from HF, on purpose:

- relative_key (Shaw et al., 2018) scores are q @ E^T gathered by clipped distance, (B, H, T, L+R+1) then
  (B, H, T, T), instead of HF's (T, T, K) embedding tensor: the same numbers in far less memory.
- The adapter zeroes padded frames before its strided convolutions (HF does not, so in a padded batch an
  odd-length utterance's last adapter frame reads the encoder's padding), and its output lengths follow
  the convolution's own arithmetic, padding ``stride // 2`` (HF's formula assumes ``kernel // 2``; the two
  agree for the default kernel 3, stride 2).

Dimension legend: B batch, T frames (20 ms), F feature bins, D d_model, H heads, K = D / H head width,
T' output frames, V vocabulary.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from asr_kernels.glu import glu
from asr_kernels.mask_time import mask_time
from asr_kernels.masks import attention_mask_4d
from asr_kernels.residual_add_mask import residual_add_mask_time
from asr_pipeline.models.w2v_bert_spec import (  # the config and sizes live in the torch-free spec
    ACTIVATION_NAMES,
    POSITION_EMBEDDINGS_TYPES,
    SIZES,
    W2VBertConfig,
    w2v_bert_config,
)
from asr_pipeline.modules.attention import RelativePositionalEncoding, relative_shift
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


def adapter_output_lengths(lengths: Tensor, kernel_size: int, stride: int) -> Tensor:
    """Conv1d arithmetic with padding stride // 2: floor((L + 2 * (stride // 2) - kernel) / stride) + 1."""
    return torch.div(lengths + 2 * (stride // 2) - kernel_size, stride, rounding_mode="floor") + 1


def span_mask(lengths: list[int], total: int, prob: float, span: int, min_spans: int) -> Tensor:
    """(B, total) bool, True inside masked spans: per example max(int(prob * L / span + u), min_spans)
    spans of ``span`` frames (u ~ U[0, 1) once per batch), distinct random starts within its length L,
    as HF's ``_compute_mask_indices`` (wav2vec 2.0's) samples them."""
    mask = torch.zeros(len(lengths), total, dtype=torch.bool)
    jitter = float(torch.rand(()))
    for b, length in enumerate(lengths):
        starts_available = max(length - span + 1, 0)
        count = min(max(int(prob * length / span + jitter), min_spans), total // span, starts_available)
        if count > 0:
            starts = torch.randperm(starts_available)[:count]
            mask[b, (starts[:, None] + torch.arange(span)).flatten()] = True
    return mask


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
            frames = torch.arange(length, device=x.device)
            distance = (frames[None, :] - frames[:, None]).clamp(-self.left, self.right) + self.left  # (T, T)
            per_distance = q @ self.distance_embedding.weight.to(q.dtype).T  # (B, H, T, L+R+1)
            bias = per_distance.gather(-1, distance.expand(*q.shape[:2], length, length)) * self.scaling
        # Additive 0 / finfo.min over padded keys (finfo.min, not -inf: a fully padded row, a zero-length
        # example, averages instead of giving NaN), built from the lengths in one kernel (asr_kernels).
        key_mask = attention_mask_4d(lengths, length, 1, q.dtype)  # (B, 1, T, T)
        attn_mask = key_mask if bias is None else (bias.to(q.dtype) + key_mask)
        context = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, dropout_p=self.dropout if self.training else 0.0, scale=self.scaling
        )  # (B, H, T, K)
        return self.linear_out(context.transpose(1, 2).flatten(2))  # (B, T, D)


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
            return residual_add_mask_time(x, branch.to(x.dtype), lengths, scale)

        x = residual(x, self.ffn1(self.ffn1_layer_norm(x)), 0.5)
        x = residual(
            x, self.self_attn_dropout(self.self_attn(self.self_attn_layer_norm(x), lengths, positions))
        )
        x = residual(x, self.conv_module(x, lengths))
        x = residual(x, self.ffn2(self.ffn2_layer_norm(x)), 0.5)
        return self.final_layer_norm(x)  # (B, T, D)


class Encoder(nn.Module):
    def __init__(self, config: W2VBertConfig, layers: nn.ModuleList) -> None:
        super().__init__()
        self.config = config
        self.embed_positions: nn.Module | None = None  # no weights: HF's are non-persistent buffers too
        if config.position_embeddings_type == "relative":
            self.embed_positions = RelativePositionalEncoding(config.d_model)  # HF's sinusoid layout
        elif config.position_embeddings_type == "rotary":
            self.embed_positions = RotaryEmbedding(config.head_size, config.rotary_embedding_base)
        self.dropout = nn.Dropout(config.rate("hidden_dropout"))
        self.layers = layers

    def forward(self, x: Tensor, lengths: Tensor) -> Tensor:
        x = self.dropout(mask_time(x, lengths))  # (B, T, D)
        positions = None if self.embed_positions is None else self.embed_positions(x.size(1))
        for layer in self.layers:
            if self.training and self.config.layerdrop > 0 and float(torch.rand(())) < self.config.layerdrop:
                continue  # LayerDrop (Fan et al., 2019)
            if self.training and self.config.activation_checkpointing:
                x = checkpoint(layer, x, lengths, positions, use_reentrant=False)
            else:
                x = layer(x, lengths, positions)
        return x


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


class Adapter(nn.Module):
    def __init__(self, config: W2VBertConfig, layers: nn.ModuleList) -> None:
        super().__init__()
        self.proj = self.proj_layer_norm = None
        if config.adapter_width != config.d_model:  # down- (or up-) projection to output_hidden_size
            self.proj = nn.Linear(config.d_model, config.adapter_width)
            self.proj_layer_norm = nn.LayerNorm(config.adapter_width, eps=config.layer_norm_eps)
        self.layers = layers

    def forward(self, x: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        if self.proj is not None:
            x = self.proj_layer_norm(self.proj(x))
        for layer in self.layers:
            x, lengths = layer(x, lengths)
        return x, lengths


class W2VBertModel(nn.Module):
    """``Wav2Vec2BertModel``'s modules under its names: features -> hidden states."""

    def __init__(
        self,
        config: W2VBertConfig,
        encoder: Encoder,
        adapter: Adapter | None,
        intermediate_ffn: FeedForward | None,
    ) -> None:
        super().__init__()
        self.config = config
        self.feature_projection = FeatureProjection(config)
        if config.has_masked_spec_embed:
            self.masked_spec_embed = nn.Parameter(torch.rand(config.d_model))  # HF: uniform [0, 1)
        self.encoder = encoder
        self.adapter = adapter
        self.intermediate_ffn = intermediate_ffn

    def mask_hidden_states(self, x: Tensor, lengths: Tensor) -> Tensor:
        """SpecAugment on (B, T, D) hidden states: time spans -> masked_spec_embed, channel spans -> 0."""
        c = self.config
        if c.mask_time_prob > 0:
            spans = span_mask(
                lengths.tolist(), x.size(1), c.mask_time_prob, c.mask_time_length, c.mask_time_min_masks
            )
            x = torch.where(spans.to(x.device)[..., None], self.masked_spec_embed.to(x.dtype), x)  # (B, T, D)
        if c.mask_feature_prob > 0:
            width = x.size(2)
            channels = span_mask(
                [width] * len(x), width, c.mask_feature_prob, c.mask_feature_length, c.mask_feature_min_masks
            )
            x = x.masked_fill(channels.to(x.device)[:, None, :], 0.0)  # (B, T, D), (B, D) spans zeroed
        return x

    def forward(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        x = self.feature_projection(features)  # (B, T, D)
        if self.training and self.config.apply_spec_augment and self.config.has_masked_spec_embed:
            x = self.mask_hidden_states(x, lengths)
        x = self.encoder(x, lengths)  # (B, T, D)
        if self.intermediate_ffn is not None:
            x = x + 0.5 * self.intermediate_ffn(x)
        if self.adapter is not None:
            x, lengths = self.adapter(x, lengths)  # (B, T', D_adapter)
        return x, lengths


class W2VBertCTC(nn.Module):
    """``Wav2Vec2BertForCTC``'s layout: ``wav2vec2_bert`` (the encoder), ``dropout``, ``lm_head``."""

    def __init__(self, config: W2VBertConfig, wav2vec2_bert: W2VBertModel) -> None:
        super().__init__()
        self.config = config
        self.wav2vec2_bert = wav2vec2_bert
        self.dropout = nn.Dropout(config.rate("final_dropout"))
        self.lm_head = nn.Linear(
            config.adapter_width if config.add_adapter else config.d_model, config.vocab_size
        )

    def output_lengths(self, feature_lengths: Tensor) -> Tensor:
        """20 ms in, 20 ms out; each adapter layer applies its strided conv's length arithmetic."""
        lengths = feature_lengths
        if self.config.add_adapter:
            for _ in range(self.config.num_adapter_layers):
                lengths = adapter_output_lengths(
                    lengths, self.config.adapter_kernel_size, self.config.adapter_stride
                )
        return lengths

    def encode(self, features: Tensor, feature_lengths: Tensor) -> tuple[Tensor, Tensor]:
        """features: (B, T, F); feature_lengths: (B,) int64 -> hidden states (B, T', D) and (B,) lengths."""
        if features.dim() != 3 or features.size(-1) != self.config.input_dim:
            raise ValueError(
                f"expected features of shape (B, T, {self.config.input_dim}), got {tuple(features.shape)}; "
                "check that the feature extractor and the model config agree on input_dim"
            )
        return self.wav2vec2_bert(features, feature_lengths)

    def forward(self, features: Tensor, feature_lengths: Tensor) -> tuple[Tensor, Tensor]:
        """Returns CTC log-probabilities (B, T', V) and their (B,) lengths; frames past a length are padding."""
        hidden, lengths = self.encode(features, feature_lengths)
        # float32 log-probs even under bf16/fp16 autocast: CTC sums probabilities over many alignments.
        return self.lm_head(self.dropout(hidden)).float().log_softmax(dim=-1), lengths  # (B, T', V), (B,)


def build_w2v_bert(config: W2VBertConfig) -> W2VBertCTC:
    """Assemble the model from its blocks; every named size below is this with other numbers."""
    encoder = Encoder(config, nn.ModuleList(ConformerLayer(config) for _ in range(config.num_layers)))
    adapter = None
    if config.add_adapter:
        adapter = Adapter(
            config, nn.ModuleList(AdapterLayer(config) for _ in range(config.num_adapter_layers))
        )
    intermediate_ffn = None
    if config.use_intermediate_ffn_before_adapter:
        intermediate_ffn = FeedForward(config, config.d_model, "relu")
    return W2VBertCTC(config, W2VBertModel(config, encoder, adapter, intermediate_ffn))


def w2v_bert_600m(**overrides: object) -> W2VBertCTC:
    return build_w2v_bert(w2v_bert_config("600m", **overrides))


def w2v_bert_tiny(**overrides: object) -> W2VBertCTC:
    return build_w2v_bert(w2v_bert_config("tiny", **overrides))


def w2v_bert_demo(**overrides: object) -> W2VBertCTC:
    return build_w2v_bert(w2v_bert_config("demo", **overrides))


__all__ = [  # the config and sizes are models.w2v_bert_spec's, re-exported for the model's users
    "ACTIVATIONS",
    "ACTIVATION_NAMES",
    "POSITION_EMBEDDINGS_TYPES",
    "SIZES",
    "W2VBertCTC",
    "W2VBertConfig",
    "W2VBertModel",
    "adapter_output_lengths",
    "build_w2v_bert",
    "span_mask",
    "w2v_bert_600m",
    "w2v_bert_config",
    "w2v_bert_demo",
    "w2v_bert_tiny",
]
