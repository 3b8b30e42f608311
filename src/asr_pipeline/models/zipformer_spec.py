"""Zipformer's registry entry: how a variant name and overrides become a ``ZipformerConfig``, its recipe
learning rate, frontend and output kind (``models.registry.ArchitectureSpec``)."""

from __future__ import annotations

from collections.abc import Mapping

from asr_pipeline.models.spec import ArchitectureSpec
from asr_pipeline.models.zipformer import SIZES, ZipformerConfig, build_zipformer, zipformer_config

DEFAULT_VARIANT = "m"  # icefall's default (train.py) sizes
# The reference trainer trains every Zipformer size with AdamW at peak 1e-3. icefall's own recipe (ScaledAdam,
# base_lr 0.045) is not comparable: ScaledAdam scales each update by the parameter's magnitude.
PEAK_LR = 1e-3


def config_for(variant: str | None, values: Mapping[str, object]) -> ZipformerConfig:
    """``variant``'s config with ``values`` (config fields) over it; no variant: M, icefall's default."""
    return zipformer_config(DEFAULT_VARIANT if variant is None else variant, **values)


def peak_learning_rate(variant: str | None) -> float:
    return PEAK_LR


ZIPFORMER = ArchitectureSpec(
    name="zipformer",
    config_class=ZipformerConfig,
    variants=tuple(SIZES),
    config_for=config_for,
    builder=build_zipformer,
    peak_learning_rate=peak_learning_rate,
    frontend="fbank",
    input_dim=80,
    output="ctc",
    encoder_blocks=lambda model: [layer for stack in model.stacks for layer in stack.layers],
)
