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
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from asr_kernels.mask_time import mask_time
from asr_pipeline.models.w2v_bert_blocks import (  # the blocks, ACTIVATIONS re-exported for w2v_bert_hf
    ACTIVATIONS,
    AdapterLayer,
    ConformerLayer,
    FeatureProjection,
    FeedForward,
    RotaryEmbedding,
    adapter_output_lengths,
)
from asr_pipeline.models.w2v_bert_spec import (  # the config and sizes live in the torch-free spec
    ACTIVATION_NAMES,
    POSITION_EMBEDDINGS_TYPES,
    SIZES,
    W2VBertConfig,
    w2v_bert_config,
)
from asr_pipeline.modules.attention import RelativePositionalEncoding
from asr_pipeline.modules.masks import span_mask


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
            time = c.mask_time_prob, c.mask_time_length, c.mask_time_min_masks
            spans = span_mask(lengths, x.size(1), *time, rule="hf")
            x = torch.where(spans[..., None], self.masked_spec_embed.to(x.dtype), x)  # (B, T, D)
        if c.mask_feature_prob > 0:
            width = x.size(2)
            widths = torch.full((len(x),), width, device=x.device)
            feature = c.mask_feature_prob, c.mask_feature_length, c.mask_feature_min_masks
            channels = span_mask(widths, width, *feature, rule="hf")
            x = x.masked_fill(channels[:, None, :], 0.0)  # (B, T, D), (B, D) spans zeroed
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
    "w2v_bert_600m",
    "w2v_bert_config",
    "w2v_bert_demo",
    "w2v_bert_tiny",
]
