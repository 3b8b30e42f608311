"""Zipformer-CTC (Yao et al., 2023, "Zipformer: A faster and better encoder for automatic speech
recognition", arXiv:2310.11230; icefall ``egs/librispeech/ASR/zipformer``), with a CTC head.

What makes it a Zipformer, and where it lives:

    macro  U-Net-like stacks at 50 Hz / (1, 2, 4, 8, 4, 2), each its own width    -> Zipformer.forward
           learned downsampling into a stack, repeat-upsampling and a learned bypass
           out of it                                                              -> ZipformerStack
           the output takes each channel from the latest stack that has it        -> full_dim_output
    layer  one attention-weight computation shared by two self-attentions and a
           non-linear attention; 3 feed-forwards, 2 convolution modules, a
           mid-layer bypass                                                       -> ZipformerEncoderLayer
    micro  BiasNorm, SwooshL/SwooshR                                              -> modules/zipformer_blocks.py,
                                                                                     asr_kernels/swoosh.py

Frame rates with 10 ms features: Conv2dSubsampling takes T frames to (T-7)//2 at 20 ms (50 Hz); stack i
runs at 20 ms x downsampling_factor[i] (20, 40, 80, 160, 80, 40 ms by default), each stack's output is
upsampled back to 50 Hz, and the combined output is downsampled by ``output_downsampling_factor`` (icefall's
name; 2 by default: 40 ms, 25 Hz) for CTC. With near-character pieces a fast speaker says ~20 pieces a
second, which 25 Hz frames can barely hold with CTC's blanks; factor 1 keeps the CTC head at 50 Hz. An
utterance needs at least 9 input frames (90 ms); shorter ones are refused with a ValueError.

Padding never leaks into real frames: the front end's time convs are valid convs (and its ConvNeXt reads
zeros past each utterance's end), attention masks padded keys, convolution modules zero padded frames,
and downsampling (asr_kernels' PairwiseDownsample) averages each group of frames with softmax weights
renormalised over the group's real frames. For factor 2 that is what icefall computes for a lone utterance
(it repeats the last frame); a factor-4 or -8 group that straddles an utterance's end differs from icefall's
repeat-the-last-frame rule, by design: only real frames are read.

Hot-spot ops (SwooshL/R, the relative shift, masks from lengths, the downsampling) go through
``asr_kernels``: Triton kernels where ``train.run.kernels`` says so, their PyTorch references elsewhere.

Dimension legend: B batch, T input frames, F feature bins, T' frames at a stack's rate, D a stack's width,
V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
from torch import Tensor, nn

from asr_kernels.pairwise_downsample import PairwiseDownsample
from asr_kernels.residual_add_mask import residual_add_mask_time
from asr_kernels.swoosh import SWOOSH_FORMS, Swoosh
from asr_pipeline.modules.masks import check_input_normalization, normalize_input
from asr_pipeline.modules.zipformer_blocks import (
    BiasNorm,
    Bypass,
    ConvolutionModule,
    FeedForward,
    NonlinAttention,
    RelPositionAttentionWeights,
    SelfAttention,
    compact_relative_positions,
)
from asr_pipeline.modules.zipformer_subsampling import (
    MIN_INPUT_FRAMES,
    Conv2dSubsampling,
    convert_num_channels,
    downsampled_lengths,
    embed_output_lengths,
    upsample,
)

PER_STACK_FIELDS = (
    "num_encoder_layers",
    "encoder_dim",
    "encoder_unmasked_dim",
    "feedforward_dim",
    "num_heads_per_stack",
    "cnn_module_kernel",
)


@dataclass(frozen=True)
class ZipformerConfig:
    """Defaults: icefall's Zipformer-M (``zipformer/train.py``). Per-stack fields have one entry per
    entry of ``downsampling_factor``; ``num_heads_per_stack`` is icefall's ``--num-heads``."""

    input_dim: int = 80
    vocab_size: int = 500  # CTC outputs, blank included (icefall: BPE 500)
    dropout: float = 0.1
    downsampling_factor: tuple[int, ...] = (1, 2, 4, 8, 4, 2)  # per stack, relative to 50 Hz
    num_encoder_layers: tuple[int, ...] = (2, 2, 3, 4, 3, 2)
    encoder_dim: tuple[int, ...] = (192, 256, 384, 512, 384, 256)
    encoder_unmasked_dim: tuple[int, ...] = (192, 192, 256, 256, 256, 192)  # never feature-masked
    feedforward_dim: tuple[int, ...] = (512, 768, 1024, 1536, 1024, 768)  # the middle of 3 FFNs; x3/4, x5/4
    num_heads_per_stack: tuple[int, ...] = (4, 4, 4, 8, 4, 4)
    cnn_module_kernel: tuple[int, ...] = (31, 31, 15, 15, 15, 31)
    query_head_dim: int = 32
    pos_head_dim: int = 4
    value_head_dim: int = 12
    pos_dim: int = 48
    embed_channels: tuple[int, ...] = (8, 32, 128)  # Conv2dSubsampling's three conv widths
    # icefall's feature masking in training: per utterance, channels past encoder_unmasked_dim are zeroed
    # with this probability (half of them; the other half ~twice as often). 0 turns it off.
    feature_mask_prob: float = 0.125
    swoosh: str = "paper"  # "paper": SwooshL/R as published; "sigmoid": x * sigmoid(x - 4 or 1)
    input_normalization: str | None = "utterance"  # per-utterance CMVN of the fbank input, or None
    # The CTC head's frame rate: 50 Hz / this (icefall's --output-downsampling-factor; 2: 25 Hz).
    output_downsampling_factor: int = 2

    def __post_init__(self) -> None:
        for field in fields(self):  # JSON gives lists back; keep the config hashable and comparable
            if isinstance(getattr(self, field.name), list):
                object.__setattr__(self, field.name, tuple(getattr(self, field.name)))
        num_stacks = len(self.downsampling_factor)
        if num_stacks == 0 or any(int(f) != f or f < 1 for f in self.downsampling_factor):
            raise ValueError(
                f"downsampling_factor must be one integer >= 1 per stack, e.g. (1, 2, 4, 8, 4, 2); "
                f"got {self.downsampling_factor}"
            )
        for name in PER_STACK_FIELDS:
            value = getattr(self, name)
            if len(value) != num_stacks:
                raise ValueError(
                    f"{name}={value} has {len(value)} entries but downsampling_factor="
                    f"{self.downsampling_factor} defines {num_stacks} stacks; give one entry per stack"
                )
            if any(v < 1 for v in value):
                raise ValueError(f"{name}={value}: every entry must be >= 1")
        for stack, (unmasked, dim) in enumerate(
            zip(self.encoder_unmasked_dim, self.encoder_dim, strict=True)
        ):
            if unmasked > dim:
                raise ValueError(
                    f"encoder_unmasked_dim[{stack}]={unmasked} exceeds encoder_dim[{stack}]={dim}; "
                    "the unmasked channels are a prefix of the stack's channels"
                )
        if any(k % 2 != 1 for k in self.cnn_module_kernel):
            raise ValueError(
                f"cnn_module_kernel entries must be odd ('same' padding), got {self.cnn_module_kernel}"
            )
        if self.pos_dim < 2 or self.pos_dim % 2:
            raise ValueError(f"pos_dim must be even and >= 2 (cos/sin pairs), got {self.pos_dim}")
        if min(self.query_head_dim, self.pos_head_dim, self.value_head_dim) < 1:
            raise ValueError("query_head_dim, pos_head_dim and value_head_dim must be >= 1")
        if len(self.embed_channels) != 3:
            raise ValueError(
                f"embed_channels needs the three conv widths, e.g. (8, 32, 128); got {self.embed_channels}"
            )
        if self.input_dim < 7:
            raise ValueError(f"input_dim={self.input_dim}: the front end needs at least 7 feature bins")
        if int(self.output_downsampling_factor) != self.output_downsampling_factor or (
            self.output_downsampling_factor < 1
        ):
            raise ValueError(
                f"output_downsampling_factor must be an integer >= 1 (1: CTC at 50 Hz, 2: 25 Hz), "
                f"got {self.output_downsampling_factor}"
            )
        if self.swoosh not in SWOOSH_FORMS:
            raise ValueError(f"swoosh must be one of {SWOOSH_FORMS}, got {self.swoosh!r}")
        check_input_normalization(self.input_normalization)
        if not (0.0 <= self.dropout < 1.0 and 0.0 <= self.feature_mask_prob < 1.0):
            raise ValueError(
                f"dropout={self.dropout} and feature_mask_prob={self.feature_mask_prob} must lie in [0, 1)"
            )

    @property
    def output_dim(self) -> int:
        """Width of the combined output the CTC head reads: the widest stack's."""
        return max(self.encoder_dim)


class ZipformerEncoderLayer(nn.Module):
    """Yao et al. §3.2, Fig. 2 (icefall's Zipformer2EncoderLayer): FFN, NonlinAttention, SelfAttention,
    Conv, FFN, bypass, SelfAttention, Conv, FFN, BiasNorm, bypass; one set of attention weights for all
    three attention modules, a sum of residuals rather than pre-/post-norm around each module."""

    def __init__(self, config: ZipformerConfig, stack: int) -> None:
        super().__init__()
        dim, ff_dim = config.encoder_dim[stack], config.feedforward_dim[stack]
        heads, kernel, p = config.num_heads_per_stack[stack], config.cnn_module_kernel[stack], config.dropout
        form = config.swoosh
        self.self_attn_weights = RelPositionAttentionWeights(
            dim, config.pos_dim, heads, config.query_head_dim, config.pos_head_dim
        )
        self.self_attn1 = SelfAttention(dim, heads, config.value_head_dim)
        self.self_attn2 = SelfAttention(dim, heads, config.value_head_dim)
        self.feed_forward1 = FeedForward(dim, ff_dim * 3 // 4, p, Swoosh("l", form))
        self.feed_forward2 = FeedForward(dim, ff_dim, p, Swoosh("l", form))
        self.feed_forward3 = FeedForward(dim, ff_dim * 5 // 4, p, Swoosh("l", form))
        self.nonlin_attention = NonlinAttention(dim, hidden_dim=3 * dim // 4)
        self.conv_module1 = ConvolutionModule(dim, kernel, Swoosh("r", form))
        self.conv_module2 = ConvolutionModule(dim, kernel, Swoosh("r", form))
        self.bypass_mid = Bypass(dim)
        self.norm = BiasNorm(dim)
        self.bypass = Bypass(dim)

    def forward(self, x: Tensor, pos_emb: Tensor, lengths: Tensor) -> Tensor:
        """x: (B, T', D); pos_emb: (2T'-1, pos_dim); lengths: (B,) real frames at this stack's rate."""
        orig = x
        weights = self.self_attn_weights(x, pos_emb, lengths)  # (B, H, T', T')

        def residual(x: Tensor, branch: Tensor) -> Tensor:  # x + branch, padded frames zeroed (one kernel)
            return residual_add_mask_time(x, branch.to(x.dtype), lengths)

        x = residual(x, self.feed_forward1(x))
        x = residual(x, self.nonlin_attention(x, weights[:, :1]))
        x = residual(x, self.self_attn1(x, weights))
        x = residual(x, self.conv_module1(x, lengths))
        x = residual(x, self.feed_forward2(x))
        x = self.bypass_mid(orig, x)
        x = residual(x, self.self_attn2(x, weights))
        x = residual(x, self.conv_module2(x, lengths))
        x = residual(x, self.feed_forward3(x))
        return self.bypass(orig, self.norm(x))  # (B, T', D)


class ZipformerStack(nn.Module):
    """Layers run at 50 Hz / ``factor``: PairwiseDownsample in, repeat-upsample out, and a learned
    per-channel Bypass between the stack's input and its upsampled output (icefall's
    DownsampledZipformer2Encoder; a factor-1 stack has none of the three, as in icefall)."""

    def __init__(self, layers: nn.ModuleList, dim: int, factor: int, pos_dim: int) -> None:
        super().__init__()
        self.layers = layers
        self.factor, self.pos_dim = factor, pos_dim
        self.downsample = PairwiseDownsample(factor) if factor > 1 else None
        self.out_combiner = Bypass(dim) if factor > 1 else None

    def forward(self, x: Tensor, lengths: Tensor, feature_mask: Tensor | None) -> Tensor:
        """x: (B, T', D) at 50 Hz; lengths: (B,) at 50 Hz; feature_mask: (B, 1, D) or None. Returns (B, T', D)."""
        orig = x
        if self.downsample is not None:
            x = self.downsample(x, lengths)  # (B, ceil(T'/f), D)
            lengths = downsampled_lengths(lengths, self.factor)
        pos_emb = compact_relative_positions(x.size(1), self.pos_dim, x.device)  # (2T'-1, pos_dim)
        for layer in self.layers:
            x = layer(x if feature_mask is None else x * feature_mask, pos_emb, lengths)
        if feature_mask is not None:
            x = x * feature_mask
        if self.downsample is None:
            return x
        return self.out_combiner(orig, upsample(x, self.factor, orig.size(1)))


class Zipformer(nn.Module):
    def __init__(
        self,
        config: ZipformerConfig,
        encoder_embed: nn.Module,
        stacks: nn.ModuleList,
        downsample_output: nn.Module | None,
    ) -> None:
        super().__init__()
        self.config = config
        self.encoder_embed = encoder_embed
        self.stacks = stacks
        self.downsample_output = downsample_output
        self.dropout = nn.Dropout(config.dropout)  # icefall's ctc_output starts with Dropout(0.1)
        self.output = nn.Linear(config.output_dim, config.vocab_size)

    def output_lengths(self, feature_lengths: Tensor) -> Tensor:
        """(L - 7) // 2 at 50 Hz, then ceil(. / output_downsampling_factor)."""
        return downsampled_lengths(
            embed_output_lengths(feature_lengths), self.config.output_downsampling_factor
        )

    def feature_masks(self, x: Tensor) -> list[Tensor | None]:
        """icefall's get_feature_masks: in training, per utterance, zero the channels past
        encoder_unmasked_dim in every stack: the first half of them with probability p, the rest with
        ~2p. Narrower "sub-models" must then work alone, which regularises the wide stacks."""
        config = self.config
        if not self.training or config.feature_mask_prob == 0.0:
            return [None] * len(self.stacks)
        batch, p = x.size(0), config.feature_mask_prob
        keep1 = (torch.rand(batch, 1, 1, device=x.device) > p).to(x.dtype)  # (B, 1, 1)
        keep2 = keep1 * (torch.rand(batch, 1, 1, device=x.device) > p).to(x.dtype)
        masks = []
        for dim, unmasked in zip(config.encoder_dim, config.encoder_unmasked_dim, strict=True):
            middle = unmasked + (dim - unmasked) // 2
            mask = torch.ones(batch, 1, dim, device=x.device, dtype=x.dtype)
            mask[..., unmasked:middle] = keep1.expand(-1, -1, middle - unmasked)
            mask[..., middle:] = keep2.expand(-1, -1, dim - middle)
            masks.append(mask)
        return masks

    def full_dim_output(self, outputs: list[Tensor]) -> Tensor:
        """(B, T', max D): channel c from the last stack at least c + 1 wide (icefall's _get_full_dim_output),
        so the widest stack's extra channels still reach the output when later stacks are narrower."""
        pieces, covered = [outputs[-1]], self.config.encoder_dim[-1]
        for output, dim in zip(reversed(outputs[:-1]), reversed(self.config.encoder_dim[:-1]), strict=True):
            if dim > covered:
                pieces.append(output[..., covered:dim])
                covered = dim
        return torch.cat(pieces, dim=-1)

    def forward(self, features: Tensor, feature_lengths: Tensor) -> tuple[Tensor, Tensor]:
        """features: (B, T, F) float; feature_lengths: (B,) int64, each >= 9.
        Returns CTC log-probabilities (B, T'', V) at 50 Hz / output_downsampling_factor and their (B,)
        lengths; frames past a length are padding."""
        if features.dim() != 3 or features.size(-1) != self.config.input_dim:
            raise ValueError(
                f"expected features of shape (B, T, {self.config.input_dim}), got {tuple(features.shape)}; "
                "check that the feature extractor and the model config agree on input_dim"
            )
        shortest = features.size(1)
        # Reading the lengths' minimum is a device sync and, under torch.compile, a graph break (issue 36):
        # eager calls check every utterance, a compiled forward only the padded T, a static shape.
        if feature_lengths.numel() and not torch.compiler.is_compiling():
            shortest = min(shortest, int(feature_lengths.min()))
        if shortest < MIN_INPUT_FRAMES:
            raise ValueError(
                f"Zipformer needs at least {MIN_INPUT_FRAMES} input frames (90 ms at a 10 ms hop) per "
                f"utterance, got a length of {shortest}: its front end turns L frames "
                "into (L - 7) // 2. Drop shorter utterances (a minimum duration in the data config) or pad them."
            )
        features = normalize_input(features, feature_lengths, self.config.input_normalization)  # (B, T, F)
        x, lengths = self.encoder_embed(features, feature_lengths)  # (B, T', D0) at 50 Hz
        outputs = []
        for stack, dim, feature_mask in zip(
            self.stacks, self.config.encoder_dim, self.feature_masks(x), strict=True
        ):
            x = stack(convert_num_channels(x, dim), lengths, feature_mask)  # (B, T', D_i)
            outputs.append(x)
        x = self.full_dim_output(outputs)  # (B, T', max D) at 50 Hz
        if self.downsample_output is not None:
            x = self.downsample_output(x, lengths)  # (B, ceil(T'/factor), max D)
            lengths = downsampled_lengths(lengths, self.config.output_downsampling_factor)
        # float32 log-probs even under bf16/fp16 autocast: CTC sums probabilities over many alignments.
        return self.output(self.dropout(x)).float().log_softmax(dim=-1), lengths  # (B, T'', V), (B,)


def build_zipformer(config: ZipformerConfig) -> Zipformer:
    """Assemble a Zipformer from its blocks; every named size below is this with other numbers."""
    stacks = nn.ModuleList(
        ZipformerStack(
            nn.ModuleList(ZipformerEncoderLayer(config, stack) for _ in range(num_layers)),
            dim=config.encoder_dim[stack],
            factor=config.downsampling_factor[stack],
            pos_dim=config.pos_dim,
        )
        for stack, num_layers in enumerate(config.num_encoder_layers)
    )
    embed = Conv2dSubsampling(
        config.input_dim, config.encoder_dim[0], config.embed_channels, config.dropout, config.swoosh
    )
    factor = config.output_downsampling_factor
    return Zipformer(config, embed, stacks, PairwiseDownsample(factor) if factor > 1 else None)


# Named sizes. S, M and L are icefall's LibriSpeech models (egs/librispeech/ASR/RESULTS.md, "zipformer
# (zipformer + pruned stateless transducer)"; M is train.py's defaults), with icefall's encoder parameter
# count: the published model total minus the transducer's decoder, joiner and pruned-RNN-T projections
# (the arithmetic is in tests/models/test_zipformer.py). This encoder has exactly icefall's parameters
# except one unused per-layer vector icefall keeps ("bypass_scale", marked "TODO: remove it"), 2.9-9.3 k.
@dataclass(frozen=True)
class NamedSize:
    num_encoder_layers: tuple[int, ...]
    encoder_dim: tuple[int, ...]
    encoder_unmasked_dim: tuple[int, ...]
    feedforward_dim: tuple[int, ...]
    num_heads_per_stack: tuple[int, ...] = (4, 4, 4, 8, 4, 4)
    cnn_module_kernel: tuple[int, ...] = (31, 31, 15, 15, 15, 31)
    query_head_dim: int = 32
    value_head_dim: int = 12
    pos_dim: int = 48
    embed_channels: tuple[int, ...] = (8, 32, 128)
    icefall_encoder_params: int | None = None  # encoder_embed + encoder, no decoder/joiner/CTC head


SIZES: dict[str, NamedSize] = {
    "s": NamedSize(
        num_encoder_layers=(2, 2, 2, 2, 2, 2),
        encoder_dim=(192, 256, 256, 256, 256, 256),
        encoder_unmasked_dim=(192, 192, 192, 192, 192, 192),
        feedforward_dim=(512, 768, 768, 768, 768, 768),
        icefall_encoder_params=21_989_779,
    ),
    "m": NamedSize(
        num_encoder_layers=(2, 2, 3, 4, 3, 2),
        encoder_dim=(192, 256, 384, 512, 384, 256),
        encoder_unmasked_dim=(192, 192, 256, 256, 256, 192),
        feedforward_dim=(512, 768, 1024, 1536, 1024, 768),
        icefall_encoder_params=63_994_103,
    ),
    "l": NamedSize(
        num_encoder_layers=(2, 2, 4, 5, 4, 2),
        encoder_dim=(192, 256, 512, 768, 512, 256),
        encoder_unmasked_dim=(192, 192, 256, 320, 256, 192),
        feedforward_dim=(512, 768, 1536, 2048, 1536, 768),
        icefall_encoder_params=146_625_594,
    ),
    # CPU sizes, not icefall's. "tiny" exists for tests: six one-layer stacks at every frame rate, of two
    # widths (so channel truncation, zero-padding and the full-dim output combination all run), in
    # milliseconds.
    "tiny": NamedSize(
        num_encoder_layers=(1, 1, 1, 1, 1, 1),
        encoder_dim=(32, 48, 48, 48, 48, 32),
        encoder_unmasked_dim=(32, 32, 32, 32, 32, 32),
        feedforward_dim=(64, 96, 96, 96, 96, 64),
        num_heads_per_stack=(2, 2, 2, 2, 2, 2),
        cnn_module_kernel=(7, 7, 5, 5, 5, 7),
        query_head_dim=8,
        value_head_dim=8,
        pos_dim=16,
        embed_channels=(4, 8, 16),
    ),
    # "demo" is for `make demo` on a 2-core CPU: 9 layers (1, 1, 2, 2, 2, 1) of widths 96-160, 4.7 M
    # parameters with a 257-piece vocabulary (Squeezeformer's demo: 3.7 M). Its one deliberate departure
    # from icefall's shapes is a narrower front end, conv widths (8, 32, 32) instead of (8, 32, 128): on
    # 16 six-second utterances the front end's forward + backward alone took 2.0 s at 128 channels, 0.46 s
    # at 32 (its ConvNeXt runs at 50 Hz over 19 frequency bins). Measured on the shared 2-core dev box,
    # interleaved with Squeezeformer demo, one forward + backward + AdamW step on 16 six-second utterances
    # takes 1.0 s (median of 5: 1.2 s), against 1.1 s (median 1.4 s) for Squeezeformer demo.
    "demo": NamedSize(
        num_encoder_layers=(1, 1, 2, 2, 2, 1),
        encoder_dim=(96, 112, 128, 160, 128, 112),
        encoder_unmasked_dim=(96, 96, 96, 128, 96, 96),
        feedforward_dim=(256, 320, 384, 448, 384, 320),
        num_heads_per_stack=(4, 4, 4, 4, 4, 4),
        embed_channels=(8, 32, 32),
    ),
}


def zipformer_config(size: str, **overrides: object) -> ZipformerConfig:
    """The config of a named size; ``overrides`` (any ZipformerConfig field) win."""
    if size not in SIZES:
        raise ValueError(f"unknown Zipformer size {size!r}; choose one of: {', '.join(SIZES)}")
    named = SIZES[size]
    values: dict[str, object] = {
        field.name: getattr(named, field.name)
        for field in fields(named)
        if field.name != "icefall_encoder_params"
    }
    values.update(overrides)
    return ZipformerConfig(**values)  # type: ignore[arg-type]


def zipformer_s(**overrides: object) -> Zipformer:
    return build_zipformer(zipformer_config("s", **overrides))


def zipformer_m(**overrides: object) -> Zipformer:
    return build_zipformer(zipformer_config("m", **overrides))


def zipformer_l(**overrides: object) -> Zipformer:
    return build_zipformer(zipformer_config("l", **overrides))


def zipformer_tiny(**overrides: object) -> Zipformer:
    return build_zipformer(zipformer_config("tiny", **overrides))


def zipformer_demo(**overrides: object) -> Zipformer:
    return build_zipformer(zipformer_config("demo", **overrides))
