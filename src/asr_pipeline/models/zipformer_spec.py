"""Zipformer's registry entry: how a variant name and overrides become a ``ZipformerConfig``, its recipe
learning rate, frontend and output kind (``models.registry.ArchitectureSpec``). Torch-free: the model's code
(``models.zipformer``) is imported when a config or model is made."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING

from asr_pipeline.models.spec import ArchitectureSpec, narrowed_heads

if TYPE_CHECKING:
    from asr_pipeline.models.zipformer import ZipformerConfig

MODEL = "asr_pipeline.models.zipformer"
VARIANTS = ("s", "m", "l", "tiny", "demo")  # icefall's sizes (models.zipformer.SIZES), then the CPU sizes

DEFAULT_VARIANT = "m"  # icefall's default (train.py) sizes
# The reference trainer trains every Zipformer size with AdamW at peak 1e-3. icefall's own recipe (ScaledAdam,
# base_lr 0.045) is not comparable: ScaledAdam scales each update by the parameter's magnitude.
PEAK_LR = 1e-3


def config_for(variant: str | None, values: Mapping[str, object]) -> ZipformerConfig:
    """``variant``'s config with ``values`` (config fields) over it; no variant: M, icefall's default."""
    from asr_pipeline.models.zipformer import zipformer_config

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
    reference_options={
        "swoosh": (
            "sigmoid",
            "the reference trainer's kernel-table Swoosh x*sigmoid(x-4), x*sigmoid(x-1) is a different function "
            "from the paper's and icefall's, which we keep (--swoosh paper)",
        )
    },
    config_class=f"{MODEL}:ZipformerConfig",
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
