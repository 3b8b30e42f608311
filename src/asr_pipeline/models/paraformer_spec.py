"""Paraformer's registry entry: how a variant name and overrides become a ``ParaformerConfig``, its recipe
learning rate, frontend and output kind (``models.registry.ArchitectureSpec``).

Its output kind is "paraformer", not "ctc": the model takes the targets itself and returns its per-utterance
losses, and decodes to (B, U, V) token log-probs (``models.paraformer.Paraformer.forward``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from asr_pipeline.models.spec import ArchitectureSpec, narrow_by_heads

if TYPE_CHECKING:
    from asr_pipeline.models.paraformer import ParaformerConfig

MODEL = "asr_pipeline.models.paraformer"  # imported when a config or model is made (the spec is torch-free)
VARIANTS = ("base", "tiny", "demo")  # FunASR's AISHELL-1 conformer recipe, then the CPU sizes (SIZES)

DEFAULT_VARIANT = "base"  # FunASR's AISHELL-1 conformer recipe sizes
# The reference trainer's Paraformer recipe: AdamW at peak 1e-3, every size.
PEAK_LR = 1e-3


def config_for(variant: str | None, values: Mapping[str, object]) -> ParaformerConfig:
    """``variant``'s config with ``values`` (config fields) over it; no variant: base."""
    from asr_pipeline.models.paraformer import paraformer_config

    return paraformer_config(DEFAULT_VARIANT if variant is None else variant, **values)


def peak_learning_rate(variant: str | None) -> float:
    return PEAK_LR


PARAFORMER = ArchitectureSpec(
    name="paraformer",
    reference_options={
        "alignment_mode": (
            "viterbi",
            "the reference trainer builds the decoder queries from CTC forced alignment; ours from the CIF "
            "predictor as the Paraformer paper does, which needs no CTC head at decoding",
        )
    },
    config_class=f"{MODEL}:ParaformerConfig",
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
