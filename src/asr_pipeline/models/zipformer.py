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

import torch
from torch import Tensor, nn

from asr_kernels.pairwise_downsample import PairwiseDownsample
from asr_kernels.residual_add_mask import residual_add_mask_time
from asr_kernels.swoosh import Swoosh
from asr_pipeline.models.zipformer_spec import (  # the config and sizes live in the torch-free spec
    SIZES,
    ZipformerConfig,
    zipformer_config,
)
from asr_pipeline.modules.activation_constraints import Balancer, Whiten
from asr_pipeline.modules.masks import normalize_input
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


def feed_forward(dim: int, hidden_dim: int, config: ZipformerConfig) -> FeedForward:
    """A layer's feed-forward; with ``activation_constraints``, icefall's hidden Balancer and output Whiten."""
    if not config.activation_constraints:
        return FeedForward(dim, hidden_dim, config.dropout, Swoosh("l", config.swoosh))
    balancer = Balancer(hidden_dim, min_positive=0.3, max_positive=1.0, min_abs=0.75, max_abs=5.0)
    whiten = Whiten(num_groups=1, whitening_limit=7.5, prob=(0.025, 0.25), grad_scale=0.01)
    return FeedForward(dim, hidden_dim, config.dropout, Swoosh("l", config.swoosh), balancer, whiten)


class ZipformerEncoderLayer(nn.Module):
    """Yao et al. §3.2, Fig. 2 (icefall's Zipformer2EncoderLayer): FFN, NonlinAttention, SelfAttention,
    Conv, FFN, bypass, SelfAttention, Conv, FFN, BiasNorm, bypass; one set of attention weights for all
    three attention modules, a sum of residuals rather than pre-/post-norm around each module. With
    ``activation_constraints``, icefall's Balancers before the norm and after the bypass and its Whiten on
    the output (identity forwards: ``modules.activation_constraints``)."""

    def __init__(self, config: ZipformerConfig, stack: int) -> None:
        super().__init__()
        dim, ff_dim = config.encoder_dim[stack], config.feedforward_dim[stack]
        heads, kernel = config.num_heads_per_stack[stack], config.cnn_module_kernel[stack]
        form = config.swoosh
        self.self_attn_weights = RelPositionAttentionWeights(
            dim, config.pos_dim, heads, config.query_head_dim, config.pos_head_dim
        )
        self.self_attn1 = SelfAttention(dim, heads, config.value_head_dim)
        self.self_attn2 = SelfAttention(dim, heads, config.value_head_dim)
        self.feed_forward1 = feed_forward(dim, ff_dim * 3 // 4, config)
        self.feed_forward2 = feed_forward(dim, ff_dim, config)
        self.feed_forward3 = feed_forward(dim, ff_dim * 5 // 4, config)
        self.nonlin_attention = NonlinAttention(dim, hidden_dim=3 * dim // 4)
        self.conv_module1 = ConvolutionModule(dim, kernel, Swoosh("r", form))
        self.conv_module2 = ConvolutionModule(dim, kernel, Swoosh("r", form))
        self.bypass_mid = Bypass(dim)
        self.norm = BiasNorm(dim)
        self.bypass = Bypass(dim)
        constrained = config.activation_constraints
        # icefall's balancer1, balancer2 and whiten (Zipformer2EncoderLayer), the limits it starts with
        self.balancer1: nn.Module = (
            Balancer(dim, min_positive=0.45, max_positive=0.55, min_abs=0.2, max_abs=4.0)
            if constrained
            else nn.Identity()
        )
        self.balancer2: nn.Module = (
            Balancer(dim, min_positive=0.45, max_positive=0.55, min_abs=0.1, max_abs=4.0)
            if constrained
            else nn.Identity()
        )
        self.whiten: nn.Module = Whiten(1, 4.0, (0.025, 0.25), 0.01) if constrained else nn.Identity()

    def forward(self, x: Tensor, pos_emb: Tensor, lengths: Tensor) -> Tensor:
        """x: (B, T', D); pos_emb: (2T'-1, pos_dim); lengths: (B,) real frames at this stack's rate."""
        orig = x
        weights = self.self_attn_weights(x, pos_emb, lengths)  # (B, H, T', T')

        def residual(x: Tensor, branch: Tensor) -> Tensor:  # x + branch, padded frames zeroed (one kernel)
            return residual_add_mask_time(x, branch, lengths)

        x = residual(x, self.feed_forward1(x))
        x = residual(x, self.nonlin_attention(x, weights[:, :1]))
        x = residual(x, self.self_attn1(x, weights))
        x = residual(x, self.conv_module1(x, lengths))
        x = residual(x, self.feed_forward2(x))
        x = self.bypass_mid(orig, x)
        x = residual(x, self.self_attn2(x, weights))
        x = residual(x, self.conv_module2(x, lengths))
        x = residual(x, self.feed_forward3(x))
        x = self.bypass(orig, self.norm(self.balancer1(x)))
        return self.whiten(self.balancer2(x))  # (B, T', D)


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
    # The fewest 10 ms input frames an utterance may have. Training checks its batches against it on the host,
    # before they go to the device (training.ctc.check_input_lengths), on every device and under compile.
    min_input_frames = MIN_INPUT_FRAMES

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
        # Every utterance is checked where its length is a host read: lengths on the CPU, eager. On a GPU
        # the read would wait for the device (the CPU could not queue the step ahead), and under
        # torch.compile it is a graph break (issue 36): there only the padded T, a static shape, is
        # checked, and a shorter utterance gives no frames. Training checks its batches on the host before
        # they go to the device (training.ctc.check_input_lengths, with min_input_frames).
        if (
            feature_lengths.numel()
            and feature_lengths.device.type == "cpu"
            and not torch.compiler.is_compiling()
        ):
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


__all__ = [  # the config and sizes are models.zipformer_spec's, re-exported for the model's users
    "SIZES",
    "Zipformer",
    "ZipformerConfig",
    "ZipformerEncoderLayer",
    "ZipformerStack",
    "build_zipformer",
    "zipformer_config",
    "zipformer_demo",
    "zipformer_l",
    "zipformer_m",
    "zipformer_s",
    "zipformer_tiny",
]
