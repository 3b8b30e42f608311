"""Squeezeformer's config, named sizes and registry entry (``models.spec.ArchitectureSpec``): how a variant
name and overrides become a ``SqueezeformerConfig``, its recipe learning rate, frontend and output kind.
Torch-free: the model's code (``models.squeezeformer``, which imports its config from here) is imported when
a model is built."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from asr_pipeline.models.spec import (
    ArchitectureSpec,
    check_input_normalization,
    narrow_by_heads,
    size_fields,
)

MODEL = "asr_pipeline.models.squeezeformer"


def paper_time_indices(num_layers: int) -> tuple[int, int]:
    """Where the paper's sizes put the U-Net: reduce before block L/2 - 1, recover before the last block
    (XS: 16 blocks -> 7 and 15; L: 22 blocks -> 10 and 21, per the official configs)."""
    return num_layers // 2 - 1, num_layers - 1


@dataclass(frozen=True)
class SqueezeformerConfig:
    input_dim: int = 80
    vocab_size: int = 256  # CTC outputs, blank included
    d_model: int = 144
    num_layers: int = 16
    num_heads: int = 4
    ff_expansion: int = 4
    conv_kernel_size: int = 31
    conv_expansion: int = 2  # pointwise-in width, in multiples of d_model
    conv_use_glu: bool = False  # True gives Conformer's GLU gate (the paper replaced it with Swish)
    dropout: float = 0.1
    time_reduce_idx: int | None = 7  # None: no Temporal U-Net, every block at 40 ms
    time_recover_idx: int | None = 15  # None: stay at 80 ms to the output
    subsampling_channels: int | None = None  # None -> d_model, as in the official configs
    input_normalization: str | None = "utterance"  # per-utterance CMVN of the fbank input, or None

    def __post_init__(self) -> None:
        if self.d_model % self.num_heads or self.d_model % 2:
            raise ValueError(
                f"d_model={self.d_model} must be even (sinusoidal positions) and divisible by "
                f"num_heads={self.num_heads}"
            )
        check_input_normalization(self.input_normalization)
        if self.conv_kernel_size % 2 != 1:
            raise ValueError(f"conv_kernel_size must be odd, got {self.conv_kernel_size}")
        reduce, recover = self.time_reduce_idx, self.time_recover_idx
        suggestion = "(the paper's rule gives time_reduce_idx={}, time_recover_idx={})".format(
            *paper_time_indices(self.num_layers)
        )
        if reduce is None and recover is not None:
            raise ValueError(f"time_recover_idx={recover} needs a time_reduce_idx {suggestion}")
        if reduce is not None and not 0 <= reduce < self.num_layers:
            raise ValueError(f"time_reduce_idx={reduce} must lie in [0, {self.num_layers}) {suggestion}")
        if recover is not None and not reduce < recover < self.num_layers:
            raise ValueError(
                f"time_recover_idx={recover} must lie in ({reduce}, {self.num_layers}) {suggestion}"
            )

    @property
    def downsampling(self) -> int:
        """Input frames per output frame."""
        return 8 if self.time_reduce_idx is not None and self.time_recover_idx is None else 4


# Named sizes, the paper's smallest first, then the CPU sizes.
# Paper rows from Kim et al. 2022, the table of Squeezeformer sizes (LibriSpeech, vocabulary 128): width,
# blocks, heads, the peak learning rate of the Noam-style schedule, and the reported parameter count.
@dataclass(frozen=True)
class NamedSize:
    d_model: int
    num_layers: int
    num_heads: int
    peak_lr: float
    conv_kernel_size: int = 31
    paper_params_millions: float | None = None


SIZES: dict[str, NamedSize] = {
    "xs": NamedSize(144, 16, 4, 2e-3, paper_params_millions=9.0),
    "s": NamedSize(196, 18, 4, 2e-3, paper_params_millions=18.6),
    "sm": NamedSize(256, 16, 4, 2e-3, paper_params_millions=28.2),
    "m": NamedSize(324, 20, 4, 1.5e-3, paper_params_millions=55.6),
    "ml": NamedSize(512, 18, 8, 1e-3, paper_params_millions=125.1),
    "l": NamedSize(640, 22, 8, 1e-3, paper_params_millions=236.3),
    # CPU sizes, not from the paper. "tiny" exists for tests: every code path (U-Net reduce at 1,
    # recover at 3) in a few milliseconds.
    "tiny": NamedSize(32, 4, 2, 2e-3, conv_kernel_size=7),
    # "demo" is XS with 6 blocks and kernel 15 (3.7 M parameters), for an ~8-minute, 2-process CPU run on
    # ~2 hours of speech. It keeps XS's 4 heads of width 36 and the 40/80/40 ms U-Net (blocks 0-1, 2-4, 5);
    # kernel 15 still spans 600 ms at 40 ms. Measured on the 2-core dev box, one forward + backward +
    # AdamW step on 16 six-second utterances takes 3.3 s per process with two processes side by side
    # (1.75 s alone), so an epoch (3600 s of audio per rank) is ~2 minutes: ~4 epochs in 8 minutes,
    # against ~3 with 8 blocks (2.3 s alone) and under 2 with XS itself (3.9 s alone).
    "demo": NamedSize(144, 6, 4, 2e-3, conv_kernel_size=15),
}
VARIANTS = tuple(SIZES)
# A Squeezeformer built with no variant gets the reference trainer's "custom" sizes (its --d-model,
# --num-layers, --num-heads defaults); with a variant, the variant's own sizes apply.
DEFAULT_D_MODEL = 256
DEFAULT_NUM_LAYERS = 16
DEFAULT_NUM_HEADS = 4

# The paper's peaks (2e-3 for XS) belong to its large-batch LibriSpeech recipe, while this pipeline trains
# on small adaptive batches, so it starts from a more conservative peak: min(variant peak, 3e-4), and 3e-4
# itself with no variant. A run that wants another peak (the demo params do) sets optim.learning_rate.
PEAK_LR_CAP = 3e-4


def squeezeformer_config(size: str, **overrides: object) -> SqueezeformerConfig:
    """The config of a named size; ``overrides`` (any SqueezeformerConfig field) win.

    When ``num_layers`` changes and the U-Net indices are not given, they follow it by the paper's rule,
    so ``squeezeformer_config("xs", num_layers=8)`` is valid rather than pointing past the last block.
    """
    values = {**size_fields(SqueezeformerConfig, SIZES, size, "Squeezeformer size"), **overrides}
    reduce, recover = paper_time_indices(int(values["num_layers"]))  # type: ignore[arg-type]
    values.setdefault("time_reduce_idx", reduce)
    values.setdefault("time_recover_idx", recover)
    return SqueezeformerConfig(**values)  # type: ignore[arg-type]


def config_for(variant: str | None, values: Mapping[str, object]) -> SqueezeformerConfig:
    """``variant``'s config with ``values`` (config fields) over it; no variant: the reference trainer's
    default sizes (d_model 256, 16 layers, 4 heads), every other field the dataclass's default. Unless
    given, the U-Net follows num_layers by the paper's rule."""
    if variant is not None:
        return squeezeformer_config(variant, **values)
    sized: dict[str, object] = {
        "d_model": DEFAULT_D_MODEL,
        "num_layers": DEFAULT_NUM_LAYERS,
        "num_heads": DEFAULT_NUM_HEADS,
        **values,
    }
    reduce, recover = paper_time_indices(int(sized["num_layers"]))  # type: ignore[arg-type]
    sized.setdefault("time_reduce_idx", reduce)
    sized.setdefault("time_recover_idx", recover)
    return SqueezeformerConfig(**sized)  # type: ignore[arg-type]


def peak_learning_rate(variant: str | None) -> float:

    return PEAK_LR_CAP if variant is None else min(SIZES[variant].peak_lr, PEAK_LR_CAP)


def variant_peak_lr(variant: str | None) -> float | None:
    """The peak the paper trained this size with (XS/S/SM 2e-3, M 1.5e-3, ML/L 1e-3); None for no variant."""

    return None if variant is None else SIZES[variant].peak_lr


SQUEEZEFORMER = ArchitectureSpec(
    name="squeezeformer",
    config_class=SqueezeformerConfig,
    variants=VARIANTS,
    config_for=config_for,
    builder=f"{MODEL}:build_squeezeformer",
    peak_learning_rate=peak_learning_rate,
    variant_peak_lr=variant_peak_lr,
    frontend="fbank",
    input_dim=80,
    output="ctc",
    encoder_blocks=lambda model: list(model.blocks),
    frontend_modules=("subsampling",),
    ctc_head="output",
    lora_targets=r"blocks\.\d+\.(attention\.module\.(qkv|out)_proj|(attention_ff|conv_ff)\.module\.linear_(in|out))",
    narrow=lambda config, fraction: narrow_by_heads(config, fraction, ("subsampling_channels",)),
    default_sizes=f"d_model {DEFAULT_D_MODEL}, {DEFAULT_NUM_LAYERS} layers, {DEFAULT_NUM_HEADS} heads",
)
