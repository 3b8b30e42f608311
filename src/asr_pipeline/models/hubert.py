"""HuBERT (Hsu et al., 2021, "HuBERT: Self-Supervised Speech Representation Learning by Masked Prediction of
Hidden Units"): a convolutional waveform encoder and a Transformer, pretrained to predict the k-means unit of
every masked frame, then fine-tuned with a CTC head.

    waveform (B, N) -> feature_extractor: conv blocks (512 channels, total stride 320) -> (B, T, C) at 50 Hz
      -> feature_projection: LayerNorm -> Linear -> (B, T, D)
      -> [pretraining: span masking, masked frames replaced by a learned vector]
      -> transformer: x + GELU(grouped conv positions) -> LayerNorm (post-LN) -> L x layer -> (B, T, D)
      -> pretraining: final_proj -> cosine similarity with each unit's embedding / 0.1 -> CE on masked frames
         fine-tuning: dropout -> Linear -> CTC log-probs

The pipeline stores audio for this model with the ``waveform`` frontend: each 20 ms frame is 320 samples, so
the (B, T, 320) "features" are the waveform, flattened back here. Parameter names follow torchaudio's layout
(``models.hubert_import`` loads torchaudio and Hugging Face checkpoints). Post-LN (``layer_norm_first``
False, HuBERT-base) normalises before the first layer; pre-LN (large) after the last one, as fairseq does.

Masking follows the recipe (fairseq's "static" spans): per utterance of T frames, ``int(mask_prob * T /
mask_length + u)`` span starts, u ~ U[0, 1), at least ``mask_min_masks``, drawn without replacement from
the first T - mask_length frames; spans may overlap (about 55 % of frames masked at p = 0.8, length 10).
Unlike fairseq, rows are not cut to the batch's smallest masked count: the loss is a sum over masked frames.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from asr_pipeline.models.hubert_spec import (  # the config and sizes live in the torch-free spec
    SIZES,
    WAVEFORM_FRAME,
    HubertConfig,
    hubert_config,
)
from asr_pipeline.modules.masks import padding_mask, span_mask


def conv_output_lengths(config: HubertConfig, samples: Tensor) -> Tensor:
    """(B,) sample counts -> (B,) frame counts after the conv blocks: floor((L - k) / s) + 1 each, >= 0."""
    lengths = samples
    for _, kernel, stride in config.conv_layers:
        lengths = torch.div(lengths - kernel, stride, rounding_mode="floor") + 1
        lengths = lengths.clamp(min=0)
    return lengths


class _GradMultiply(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, scale: float) -> Tensor:  # type: ignore[override]
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:  # type: ignore[override]
        return grad * ctx.scale, None


class _ChannelLayerNorm(nn.LayerNorm):
    """LayerNorm over the channels of (B, C, T)."""

    def forward(self, x: Tensor) -> Tensor:
        return super().forward(x.transpose(1, 2)).transpose(1, 2)


class ConvBlock(nn.Module):
    def __init__(self, conv: nn.Conv1d, layer_norm: nn.Module | None) -> None:
        super().__init__()
        self.conv, self.layer_norm = conv, layer_norm

    def forward(self, x: Tensor) -> Tensor:  # (B, C_in, N) -> (B, C_out, N')
        x = self.conv(x)
        return F.gelu(x if self.layer_norm is None else self.layer_norm(x))


class FeatureExtractor(nn.Module):
    def __init__(self, config: HubertConfig) -> None:
        super().__init__()
        blocks, channels = [], 1
        for index, (out, kernel, stride) in enumerate(config.conv_layers):
            norm: nn.Module | None = None
            if config.extractor_mode == "layer_norm":
                norm = _ChannelLayerNorm(out, eps=config.layer_norm_eps)
            elif index == 0:
                norm = nn.GroupNorm(out, out, affine=True)
            blocks.append(ConvBlock(nn.Conv1d(channels, out, kernel, stride, bias=config.conv_bias), norm))
            channels = out
        self.conv_layers = nn.ModuleList(blocks)

    def forward(self, waveform: Tensor) -> Tensor:  # (B, N) -> (B, T, C)
        x = waveform[:, None]
        for block in self.conv_layers:
            x = block(x)
        return x.transpose(1, 2)


class FeatureProjection(nn.Module):
    def __init__(self, channels: int, config: HubertConfig) -> None:
        super().__init__()
        self.layer_norm = nn.LayerNorm(channels, eps=config.layer_norm_eps)
        self.projection = nn.Linear(channels, config.d_model)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor) -> Tensor:  # (B, T, C) -> (B, T, D)
        return self.dropout(self.projection(self.layer_norm(x)))


class ConvPositionalEmbedding(nn.Module):
    """A grouped conv over time with weight normalisation (wav2vec 2.0's relative positions); GELU."""

    def __init__(self, config: HubertConfig) -> None:
        super().__init__()
        d, kernel = config.d_model, config.pos_conv_kernel
        conv = nn.Conv1d(d, d, kernel, padding=kernel // 2, groups=config.pos_conv_groups)
        std = math.sqrt(4.0 / (kernel * d))  # fairseq's init, before the weight norm splits it
        nn.init.normal_(conv.weight, mean=0.0, std=std)
        nn.init.zeros_(conv.bias)
        self.conv = nn.utils.parametrizations.weight_norm(conv, name="weight", dim=2)
        self.trim = 1 if kernel % 2 == 0 else 0  # an even kernel gives one frame too many

    def forward(self, x: Tensor) -> Tensor:  # (B, T, D) -> (B, T, D)
        y = self.conv(x.transpose(1, 2))
        if self.trim:
            y = y[..., : -self.trim]
        return F.gelu(y).transpose(1, 2)


class SelfAttention(nn.Module):
    def __init__(self, config: HubertConfig) -> None:
        super().__init__()
        d = config.d_model
        self.num_heads, self.dropout = config.num_heads, config.attention_dropout
        self.k_proj, self.v_proj, self.q_proj = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.out_proj = nn.Linear(d, d)

    def forward(self, x: Tensor, bias: Tensor | None) -> Tensor:  # (B, T, D); bias (B, 1, 1, T) additive
        batch, frames, d = x.shape

        def heads(t: Tensor) -> Tensor:
            return t.view(batch, frames, self.num_heads, -1).transpose(1, 2)  # (B, H, T, K)

        context = F.scaled_dot_product_attention(
            heads(self.q_proj(x)), heads(self.k_proj(x)), heads(self.v_proj(x)), attn_mask=bias,
            dropout_p=self.dropout if self.training else 0.0,
        )  # fmt: skip
        return self.out_proj(context.transpose(1, 2).reshape(batch, frames, d))


class FeedForward(nn.Module):
    def __init__(self, config: HubertConfig) -> None:
        super().__init__()
        self.intermediate_dense = nn.Linear(config.d_model, config.ff_dim)
        self.intermediate_dropout = nn.Dropout(config.activation_dropout)
        self.output_dense = nn.Linear(config.ff_dim, config.d_model)
        self.output_dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.output_dropout(
            self.output_dense(self.intermediate_dropout(F.gelu(self.intermediate_dense(x))))
        )


class EncoderLayer(nn.Module):
    def __init__(self, config: HubertConfig) -> None:
        super().__init__()
        self.attention = SelfAttention(config)
        self.dropout = nn.Dropout(config.dropout)
        self.layer_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.feed_forward = FeedForward(config)
        self.final_layer_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.layer_norm_first = config.layer_norm_first

    def forward(self, x: Tensor, bias: Tensor | None = None) -> Tensor:  # (B, T, D) -> (B, T, D)
        if self.layer_norm_first:
            x = x + self.dropout(self.attention(self.layer_norm(x), bias))
            return x + self.feed_forward(self.final_layer_norm(x))
        x = self.layer_norm(x + self.dropout(self.attention(x, bias)))
        return self.final_layer_norm(x + self.feed_forward(x))


class Transformer(nn.Module):
    def __init__(self, config: HubertConfig) -> None:
        super().__init__()
        self.pos_conv_embed = ConvPositionalEmbedding(config)
        self.layer_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.num_layers))
        self.layer_norm_first = config.layer_norm_first

    def forward(self, x: Tensor, bias: Tensor | None, num_layers: int | None = None) -> list[Tensor]:
        """Each layer's output (B, T, D), of the first ``num_layers`` (None: all), as the layer gives it
        (pre-LN: not normalised; ``output`` is the encoder's output)."""
        x = x + self.pos_conv_embed(x)
        if not self.layer_norm_first:
            x = self.layer_norm(x)
        x = self.dropout(x)
        outputs = []
        for layer in self.layers[:num_layers]:
            x = layer(x, bias)
            outputs.append(x)
        return outputs

    def output(self, last: Tensor) -> Tensor:
        """The encoder's output from the last layer's: pre-LN normalises it (fairseq's final LayerNorm)."""
        return self.layer_norm(last) if self.layer_norm_first else last


class Encoder(nn.Module):
    def __init__(self, channels: int, config: HubertConfig) -> None:
        super().__init__()
        self.feature_projection = FeatureProjection(channels, config)
        self.transformer = Transformer(config)


class HubertEncoder(nn.Module):
    """Waveform -> per-layer hidden states, with optional span masking (the part both heads share)."""

    def __init__(self, config: HubertConfig) -> None:
        super().__init__()
        self.config = config
        self.feature_extractor = FeatureExtractor(config)
        self.encoder = Encoder(config.conv_layers[-1][0], config)
        self.mask_embedding = nn.Parameter(torch.empty(config.d_model).uniform_())

    def features(self, frames: Tensor, frame_lengths: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(B, T, 320) waveform frames and (B,) frame counts -> the conv features (B, T', C), their projection
        (B, T', D) with padded frames zeroed, and the (B,) output lengths."""
        config = self.config
        waveform = frames.reshape(frames.size(0), -1)  # (B, N)
        samples = frame_lengths * frames.size(-1)
        if config.normalize_waveform:
            waveform = normalized_waveform(waveform, samples)
        conv = self.feature_extractor(waveform)  # (B, T', C)
        if config.feature_grad_mult < 1.0 and conv.requires_grad:
            conv = _GradMultiply.apply(conv, config.feature_grad_mult)
        lengths = conv_output_lengths(config, samples).clamp(max=conv.size(1))
        projected = self.encoder.feature_projection(conv)  # (B, T', D)
        projected = projected.masked_fill(padding_mask(lengths, projected.size(1))[..., None], 0.0)
        return conv, projected, lengths

    def encode(self, x: Tensor, lengths: Tensor, mask: Tensor | None = None) -> Tensor:
        """The encoder's output (B, T', D) for projected features ``x``, ``mask`` as in ``hidden_states``."""
        return self.encoder.transformer.output(self.hidden_states(x, lengths, mask)[-1])

    def hidden_states(
        self, x: Tensor, lengths: Tensor, mask: Tensor | None = None, num_layers: int | None = None
    ) -> list[Tensor]:
        """The transformer's per-layer outputs for projected features ``x`` (B, T', D); ``mask`` (B, T')
        True where the frame is replaced by the mask embedding."""
        if mask is not None:
            x = torch.where(mask[..., None], self.mask_embedding.to(x.dtype), x)
        padded = padding_mask(lengths, x.size(1))  # (B, T') True at padding
        bias = torch.zeros(padded.shape, dtype=x.dtype, device=x.device)
        bias = bias.masked_fill(padded, torch.finfo(x.dtype).min)[:, None, None, :]  # (B, 1, 1, T')
        return self.encoder.transformer(x, bias, num_layers)

    def extract_features(
        self, frames: Tensor, frame_lengths: Tensor, num_layers: int | None = None
    ) -> tuple[list[Tensor], Tensor]:
        """Unmasked per-layer outputs [(B, T', D)] * layers and the (B,) output lengths (ABX, iteration-2 units)."""
        _, projected, lengths = self.features(frames, frame_lengths)
        return self.hidden_states(projected, lengths, None, num_layers), lengths


def normalized_waveform(waveform: Tensor, samples: Tensor) -> Tensor:
    """Each row's real samples to zero mean and unit variance (padding stays 0)."""
    real = ~padding_mask(samples, waveform.size(1))  # (B, N)
    count = samples.clamp(min=1)[:, None].to(waveform.dtype)
    mean = (waveform * real).sum(1, keepdim=True) / count
    var = (((waveform - mean) * real) ** 2).sum(1, keepdim=True) / count
    return ((waveform - mean) / torch.sqrt(var + 1e-5)) * real


def _init_weights(module: nn.Module) -> None:
    """fairseq / torchaudio: Linear normal(0, 0.02) with zero bias, conv blocks Kaiming normal."""
    for sub in module.modules():
        if isinstance(sub, nn.Linear):
            nn.init.normal_(sub.weight, 0.0, 0.02)
            if sub.bias is not None:
                nn.init.zeros_(sub.bias)
        elif isinstance(sub, ConvBlock):
            nn.init.kaiming_normal_(sub.conv.weight)


class HubertPretrain(nn.Module):
    """Masked prediction of units: ``forward`` returns the per-utterance loss terms the training engine
    sums (``training.ctc.model_losses``)."""

    def __init__(self, config: HubertConfig) -> None:
        super().__init__()
        self.config = config
        self.hubert = HubertEncoder(config)
        self.final_proj = nn.Linear(config.d_model, config.final_dim)
        self.label_embeddings = nn.Parameter(torch.empty(config.num_classes, config.final_dim).uniform_())
        _init_weights(self)

    def logits(self, hidden: Tensor) -> Tensor:
        """(..., D) -> (..., num_classes): cosine similarity with each unit's embedding / temperature."""
        projected = F.normalize(self.final_proj(hidden).float(), dim=-1)
        return (
            projected @ F.normalize(self.label_embeddings.float(), dim=-1).T / self.config.logit_temperature
        )

    def forward(
        self, frames: Tensor, frame_lengths: Tensor, labels: Tensor, mask: Tensor | None = None
    ) -> dict[str, Tensor]:
        """frames (B, T, 320), frame_lengths (B,), labels (B, T'') unit per output frame (negative: none,
        e.g. padding); ``mask`` (B, T') to use instead of drawing spans. Returns per-utterance (B,) sums:
        ``loss`` (weighted), ``masked`` / ``unmasked`` CE, ``feature_penalty``; ``masked_frames`` and
        ``predicted_frames`` (B,) counts, ``correct_masked`` (B,) argmax hits; ``lengths`` (B,)."""
        config = self.config
        conv, projected, lengths = self.hubert.features(frames, frame_lengths)
        frames_out = projected.size(1)
        if mask is None:
            # Eval mode (validation): the same masks every time and on every device (drawn by a CPU
            # generator), and no draw from the global RNG.
            generator = None if self.training else torch.Generator().manual_seed(0)
            mask = span_mask(
                lengths,
                frames_out,
                config.mask_prob,
                config.mask_length,
                config.mask_min_masks,
                rule="fairseq",
                generator=generator,
            )
        hidden = self.hubert.encode(projected, lengths, mask)  # (B, T', D)
        usable = min(frames_out, labels.size(1))
        targets = torch.full((len(lengths), frames_out), -1, dtype=torch.long, device=labels.device)
        targets[:, :usable] = labels[:, :usable]
        valid = (targets >= 0) & ~padding_mask(lengths, frames_out)
        logits = self.logits(hidden)  # (B, T', K)
        ce = F.cross_entropy(logits.transpose(1, 2), targets.clamp(min=0), reduction="none")  # (B, T')
        masked, unmasked = valid & mask, valid & ~mask
        predicted = masked if config.unmasked_weight == 0 else valid
        penalty = conv.float().pow(2).mean()  # fairseq's features_pen, per predicted frame below
        terms = {
            "masked": (ce * masked).sum(1),
            "unmasked": (ce * unmasked).sum(1),
            "feature_penalty": penalty * predicted.sum(1),
        }
        loss = (
            config.masked_weight * terms["masked"]
            + config.unmasked_weight * terms["unmasked"]
            + config.feature_penalty_weight * terms["feature_penalty"]
        )
        correct = ((logits.argmax(-1) == targets) & masked).sum(1)
        return {
            "loss": loss, **terms, "masked_frames": masked.sum(1), "predicted_frames": predicted.sum(1),
            "correct_masked": correct, "lengths": lengths,
        }  # fmt: skip


class HubertCTC(nn.Module):
    """The pretrained encoder with a CTC head (fine-tuning); in training, frames are span-masked with
    ``mask_prob`` as SpecAugment does (0 turns it off)."""

    def __init__(self, config: HubertConfig) -> None:
        super().__init__()
        self.config = config
        self.hubert = HubertEncoder(config)
        self.dropout = nn.Dropout(config.dropout)
        self.ctc_head = nn.Linear(config.d_model, config.vocab_size)
        _init_weights(self)

    def forward(self, frames: Tensor, frame_lengths: Tensor) -> tuple[Tensor, Tensor]:
        """frames (B, T, 320), frame_lengths (B,) -> CTC log-probs (B, T', V) at 50 Hz and (B,) lengths."""
        config = self.config
        _, projected, lengths = self.hubert.features(frames, frame_lengths)
        mask = None
        if self.training and config.mask_prob > 0:
            mask = span_mask(
                lengths, projected.size(1), config.mask_prob, config.mask_length, 0, rule="fairseq"
            )
        hidden = self.hubert.encode(projected, lengths, mask)
        return self.ctc_head(self.dropout(hidden)).float().log_softmax(-1), lengths


def build_hubert_pretrain(config: HubertConfig) -> HubertPretrain:
    return HubertPretrain(config)


def build_hubert_ctc(config: HubertConfig) -> HubertCTC:
    return HubertCTC(config)


__all__ = [  # the config and sizes are models.hubert_spec's, re-exported for the model's users
    "SIZES",
    "WAVEFORM_FRAME",
    "HubertCTC",
    "HubertConfig",
    "HubertEncoder",
    "HubertPretrain",
    "build_hubert_ctc",
    "build_hubert_pretrain",
    "conv_output_lengths",
    "hubert_config",
]
