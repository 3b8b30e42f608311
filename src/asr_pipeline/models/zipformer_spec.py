"""Zipformer's config, named sizes and registry entry (``models.spec.ArchitectureSpec``): how a variant name
and overrides become a ``ZipformerConfig``, its recipe learning rate, frontend and output kind. Torch-free:
the model's code (``models.zipformer``, which imports its config from here) is imported when a model is
built."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, fields

from asr_pipeline.models.spec import (
    ArchitectureSpec,
    check_input_normalization,
    narrowed_heads,
    sized_config,
)
from asr_pipeline.options import setting

MODEL = "asr_pipeline.models.zipformer"
# asr_kernels.swoosh.SWOOSH_FORMS, which imports torch; tests/models/test_zipformer.py keeps the two equal.
SWOOSH_FORMS = ("paper", "sigmoid")


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
    swoosh: str = setting(
        "paper",
        help="SwooshL/SwooshR activations: 'paper' is the paper's and icefall's log(1+e^(x-4))-0.08x-0.035 and "
        "log(1+e^(x-1))-0.08x-0.313261687; 'sigmoid' is the reference trainer's kernel-table form "
        "x*sigmoid(x-4), x*sigmoid(x-1), a different function",
        flag="--swoosh",
        choices=SWOOSH_FORMS,
        reference="sigmoid",
        reference_note="the reference trainer's kernel-table Swoosh x*sigmoid(x-4), x*sigmoid(x-1) is a "
        "different function from the paper's and icefall's, which we keep (--swoosh paper)",
    )
    input_normalization: str | None = "utterance"  # per-utterance CMVN of the fbank input, or None
    # icefall's Balancer and Whiten (modules.activation_constraints) at icefall's places in each layer and
    # feed-forward: identity forwards, gradient-only constraints. Off until measured on our recipes.
    activation_constraints: bool = setting(
        False,
        help="icefall's Balancer and Whiten at icefall's places in every layer and feed-forward: identity "
        "forwards that only add gradient terms keeping activations' signs, magnitudes and covariance in "
        "range (the Zipformer paper's regularisers); they add no weights",
        flag="--activation-constraints",
    )
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
    return sized_config(ZipformerConfig, SIZES, size, overrides, "Zipformer size")


VARIANTS = tuple(SIZES)  # icefall's sizes, then the CPU sizes

DEFAULT_VARIANT = "m"  # icefall's default (train.py) sizes
# The reference trainer trains every Zipformer size with AdamW at peak 1e-3. icefall's own recipe (ScaledAdam,
# base_lr 0.045) is not comparable: ScaledAdam scales each update by the parameter's magnitude.
PEAK_LR = 1e-3


def config_for(variant: str | None, values: Mapping[str, object]) -> ZipformerConfig:
    """``variant``'s config with ``values`` (config fields) over it; no variant: M, icefall's default."""
    return zipformer_config(DEFAULT_VARIANT if variant is None else variant, **values)


def peak_learning_rate(variant: str | None) -> float:
    return PEAK_LR


def narrow(config: ZipformerConfig, fraction: float) -> ZipformerConfig:
    """Every stack at ``fraction`` of its width: heads rounded (head widths kept), channel counts rounded
    to even numbers, the unmasked prefix scaled with them."""

    def even(value: int) -> int:
        return max(2, 2 * round(value * fraction / 2))

    dims = tuple(even(dim) for dim in config.encoder_dim)
    return dataclasses.replace(
        config,
        encoder_dim=dims,
        encoder_unmasked_dim=tuple(
            min(even(unmasked), dim) for unmasked, dim in zip(config.encoder_unmasked_dim, dims, strict=True)
        ),
        feedforward_dim=tuple(even(dim) for dim in config.feedforward_dim),
        num_heads_per_stack=tuple(narrowed_heads(heads, fraction) for heads in config.num_heads_per_stack),
    )


ZIPFORMER = ArchitectureSpec(
    name="zipformer",
    config_class=ZipformerConfig,
    variants=VARIANTS,
    config_for=config_for,
    builder=f"{MODEL}:build_zipformer",
    peak_learning_rate=peak_learning_rate,
    frontend="fbank",
    input_dim=80,
    output="ctc",
    encoder_blocks=lambda model: [layer for stack in model.stacks for layer in stack.layers],
    frontend_modules=("encoder_embed",),
    ctc_head="output",
    lora_targets=r"stacks\.\d+\.layers\.\d+\.(self_attn_weights\.in_proj|(self_attn[12]|feed_forward[123])\.(in|out)_proj)",
    narrow=narrow,
    default_sizes="the M sizes",
)
