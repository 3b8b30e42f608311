"""Paraformer's config, named sizes and registry entry (``models.spec.ArchitectureSpec``): how a variant name
and overrides become a ``ParaformerConfig``, its recipe learning rate, frontend and output kind. Torch-free:
the model's code (``models.paraformer``, which imports its config from here) is imported when a model is
built.

Its output kind is "paraformer", not "ctc": the model takes the targets itself and returns its per-utterance
losses, and decodes to (B, U, V) token log-probs (``models.paraformer.Paraformer.forward``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from asr_pipeline.models.spec import (
    ArchitectureSpec,
    check_input_normalization,
    narrow_by_heads,
    sized_config,
)
from asr_pipeline.options import setting

MODEL = "asr_pipeline.models.paraformer"  # imported when a model is built (the spec is torch-free)

ALIGNMENT_MODES = ("cif", "viterbi", "greedy", "uniform")
# Loss weight field of each component the training forward returns ("ce" weighs 1).
LOSS_WEIGHTS = {
    "quantity": "quantity_weight",
    "ctc": "ctc_weight",
    "shallow_ctc": "shallow_ctc_weight",
    "boundary": "boundary_weight",
    "refine": "refine_weight",
}


@dataclass(frozen=True)
class ParaformerConfig:
    """Defaults: FunASR's AISHELL-1 conformer Paraformer (``paraformer_conformer_12e_6d_2048_256.yaml``):
    width 256, 12 encoder and 6 decoder blocks, FFN 2048, kernel 15, CTC 0.3, smoothing 0.1, CIF kernel 3
    with tail threshold 0.45, glancing ratio 0.4. One difference: the CE weighs 1 and every other loss its own
    weight, where FunASR weighs the CE (1 - ctc_weight)."""

    input_dim: int = 80
    vocab_size: int = 256  # the CTC vocabulary, blank included
    dropout: float = 0.1
    d_model: int = 256
    num_layers: int = 12  # encoder blocks
    num_heads: int = 4
    decoder_layers: int = 6
    ff_expansion: int = 8  # FFN width in multiples of d_model (FunASR: 2048 = 8 x 256)
    conv_kernel_size: int = 15
    subsampling_channels: int | None = None  # None -> d_model
    input_normalization: str | None = "utterance"  # per-utterance CMVN of the fbank input, or None
    blank_id: int = 0  # the CTC blank: the CTC heads' blank, never a decoder output
    alignment_mode: str = setting(
        "cif",
        help="the decoder queries: cif (the CIF predictor's integrated frames), viterbi (the frames CTC forced "
        "alignment gives each token), greedy (the CTC greedy path's segments), uniform (frames split evenly); "
        "the non-cif modes need the CTC head (ctc_weight > 0)",
        flag="--paraformer-alignment-mode",
        choices=ALIGNMENT_MODES,
        reference="viterbi",
        reference_note="the reference trainer builds the decoder queries from CTC forced alignment; ours from "
        "the CIF predictor as the Paraformer paper does, which needs no CTC head at decoding",
    )
    predictor_kernel_size: int = 3  # the CIF predictor's conv (FunASR: l_order 1 + r_order 1 + 1)
    cif_threshold: float = 1.0
    cif_tail_threshold: float = 0.45  # added after the last frame at inference: a last token >= 0.55 fires
    glancing_ratio: float = 0.4  # share of the first pass's wrong tokens glanced at; 0 turns GLM off
    label_smoothing: float = 0.1
    quantity_weight: float = 1.0  # "cif" mode only
    ctc_weight: float = 0.3  # CTC on the final encoder; 0 removes the head ("cif" mode only)
    enhanced: bool = setting(
        False,
        help="Paraformer-v2 style: a shallow CTC head on a middle encoder layer, a token-boundary head and a "
        "refinement decoder pass, each with its loss weight (model.options *_weight)",
        flag="--paraformer-enhanced",
    )
    shallow_ctc_layer: int | None = None  # the encoder block (1-based) under the shallow CTC; None: half-way
    shallow_ctc_weight: float = 0.3
    boundary_weight: float = 0.5
    refine_weight: float = 1.0

    def __post_init__(self) -> None:
        if self.d_model % self.num_heads or self.d_model % 2:
            raise ValueError(
                f"d_model={self.d_model} must be even (sinusoidal positions) and divisible by "
                f"num_heads={self.num_heads}"
            )
        if self.alignment_mode not in ALIGNMENT_MODES:
            raise ValueError(
                f"alignment_mode must be one of {', '.join(ALIGNMENT_MODES)}, got {self.alignment_mode!r}"
            )
        if self.alignment_mode != "cif" and self.ctc_weight <= 0:
            raise ValueError(
                f"alignment_mode={self.alignment_mode!r} builds its decoder queries from the CTC head, which "
                f"ctc_weight={self.ctc_weight} leaves untrained; give ctc_weight > 0 (e.g. 0.3)"
            )
        check_input_normalization(self.input_normalization)
        if self.conv_kernel_size % 2 != 1:
            raise ValueError(f"conv_kernel_size must be odd, got {self.conv_kernel_size}")
        if not 0 <= self.blank_id < self.vocab_size or self.vocab_size < 2:
            raise ValueError(
                f"blank_id={self.blank_id} must be an id of the vocabulary of {self.vocab_size} (>= 2: the "
                "blank and at least one token)"
            )
        if not 0.0 <= self.glancing_ratio <= 1.0 or not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(
                f"glancing_ratio={self.glancing_ratio} must lie in [0, 1] and label_smoothing="
                f"{self.label_smoothing} in [0, 1)"
            )
        negative = [name for name in LOSS_WEIGHTS.values() if getattr(self, name) < 0]
        if negative:
            raise ValueError(f"loss weights must be >= 0: {', '.join(negative)}")
        if self.enhanced and not 1 <= self.shallow_layer < self.num_layers:
            raise ValueError(
                f"shallow_ctc_layer={self.shallow_ctc_layer} must lie in [1, {self.num_layers - 1}]: a block "
                f"below the last of the {self.num_layers} encoder blocks"
            )

    @property
    def shallow_layer(self) -> int:
        """The encoder block (1-based) whose output the shallow CTC head reads."""
        return self.num_layers // 2 if self.shallow_ctc_layer is None else self.shallow_ctc_layer

    def head_weight(self, name: str) -> float:
        """The loss weight of component ``name``; 0 for a head this config does not build."""
        enhanced_only = name in ("shallow_ctc", "boundary", "refine")
        if (enhanced_only and not self.enhanced) or (name == "quantity" and self.alignment_mode != "cif"):
            return 0.0
        return float(getattr(self, LOSS_WEIGHTS[name]))


@dataclass(frozen=True)
class NamedSize:
    d_model: int
    num_layers: int
    num_heads: int
    decoder_layers: int
    ff_expansion: int
    conv_kernel_size: int


SIZES: dict[str, NamedSize] = {
    # FunASR's AISHELL-1 conformer Paraformer recipe (paraformer_conformer_12e_6d_2048_256.yaml): 43.3 M
    # parameters with a 257-piece vocabulary, 46.3 M with AISHELL-1's 4234 characters.
    "base": NamedSize(256, 12, 4, 6, 8, 15),
    # CPU sizes, not from the paper. "tiny" exists for tests: every code path (the shallow CTC on block 1 of
    # 3, two decoder blocks) in ~10 ms a training step (0.13 M parameters).
    "tiny": NamedSize(32, 3, 2, 2, 2, 7),
    # "demo" is for `make demo` on a 2-core CPU: width 144 and 4 heads as Squeezeformer's demo, 4 full-rate
    # conformer blocks and 2 decoder blocks (3.3 M parameters with a 257-piece vocabulary; Squeezeformer's
    # demo 3.7 M). One forward + backward + AdamW step on 16 six-second utterances of 96 tokens, one thread,
    # CPU time, min of 4 (glancing on): 1.96 s against 1.84 s for Squeezeformer's demo; 6 blocks took 2.44 s.
    "demo": NamedSize(144, 4, 4, 2, 4, 15),
}
VARIANTS = tuple(SIZES)  # FunASR's AISHELL-1 conformer recipe, then the CPU sizes (SIZES)

DEFAULT_VARIANT = "base"  # FunASR's AISHELL-1 conformer recipe sizes
# The reference trainer's Paraformer recipe: AdamW at peak 1e-3, every size.
PEAK_LR = 1e-3


def paraformer_config(size: str, **overrides: object) -> ParaformerConfig:
    """The config of a named size; ``overrides`` (any ParaformerConfig field) win."""
    return sized_config(ParaformerConfig, SIZES, size, overrides, "Paraformer size")


def config_for(variant: str | None, values: Mapping[str, object]) -> ParaformerConfig:
    """``variant``'s config with ``values`` (config fields) over it; no variant: base."""
    return paraformer_config(DEFAULT_VARIANT if variant is None else variant, **values)


def peak_learning_rate(variant: str | None) -> float:
    return PEAK_LR


PARAFORMER = ArchitectureSpec(
    name="paraformer",
    config_class=ParaformerConfig,
    variants=VARIANTS,
    config_for=config_for,
    builder=f"{MODEL}:build_paraformer",
    peak_learning_rate=peak_learning_rate,
    frontend="fbank",
    input_dim=80,
    output="paraformer",
    encoder_blocks=lambda model: list(model.blocks),
    frontend_modules=("subsampling",),
    # Encoder and decoder attention and feed-forward projections (not the predictor or the heads).
    lora_targets=r"(decoder\.)?blocks\.\d+\.(\w*attention\.(qkv|q|kv|out)_proj|(ff|ff_in|ff_out)\.linear_(in|out))",
    narrow=lambda config, fraction: narrow_by_heads(config, fraction, ("subsampling_channels",)),
    default_sizes="the base sizes",
)
