"""Architecture + named variant -> config -> model. The one place the CLI, the Kedro train node and the
training worker turn ``--architecture``/``--variant`` flags into a model.

    config = model_config("squeezeformer", "xs", input_dim=80, vocab_size=257, dropout=0.0)
    model = build_model("squeezeformer", "demo", input_dim=80, vocab_size=257)

Overrides are config fields and win over the variant's numbers; ``None`` means "not given", so optional
command-line flags can be passed straight through. With no variant the model gets the reference trainer's
defaults (``d_model`` 256, 16 layers, 4 heads: ``models.architectures``), again unless overridden.
Configs are frozen dataclasses of plain values: ``dataclasses.asdict`` -> JSON -> ``build_from_config``
rebuilds the same model from a run directory.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from torch import nn

from asr_pipeline.models.architectures import (
    ARCHITECTURES,
    AVAILABLE_ARCHITECTURES,
    DEFAULT_D_MODEL,
    DEFAULT_NUM_HEADS,
    DEFAULT_NUM_LAYERS,
    check_available,
    check_variant,
)
from asr_pipeline.models.squeezeformer import (
    SIZES,
    SqueezeformerConfig,
    build_squeezeformer,
    paper_time_indices,
    squeezeformer_config,
)

AVAILABLE = AVAILABLE_ARCHITECTURES
# What variant=None builds: the reference trainer's default sizes; every other field is the config
# dataclass's default (kernel 31, dropout 0.1) and the U-Net follows num_layers by the paper's rule.
DEFAULT_SIZE = {"d_model": DEFAULT_D_MODEL, "num_layers": DEFAULT_NUM_LAYERS, "num_heads": DEFAULT_NUM_HEADS}


def _check_architecture(architecture: str) -> str:
    return check_available(architecture)


def _check_variant(architecture: str, variant: str | None) -> str | None:
    return check_variant(architecture, variant)


def list_variants(architecture: str) -> list[str]:
    """Named sizes, smallest paper size first, then the CPU sizes."""
    _check_architecture(architecture)
    return list(SIZES)


def model_config(
    architecture: str, variant: str | None = None, *, input_dim: int, vocab_size: int, **overrides: object
) -> SqueezeformerConfig:
    """The resolved config of ``variant`` (None: the default sizes, ``DEFAULT_SIZE``) with ``overrides``."""
    architecture = _check_architecture(architecture)
    variant = _check_variant(architecture, variant)
    given = {key: value for key, value in overrides.items() if value is not None}
    fields = {field.name for field in dataclasses.fields(SqueezeformerConfig)}
    unknown = sorted(set(given) - fields)
    if unknown:
        raise ValueError(
            f"unknown {architecture} config field(s) {', '.join(unknown)}; valid fields: {', '.join(sorted(fields))}"
        )
    if variant is None:
        values: dict[str, object] = {**DEFAULT_SIZE, **given}
        reduce, recover = paper_time_indices(int(values["num_layers"]))  # type: ignore[arg-type]
        values.setdefault("time_reduce_idx", reduce)
        values.setdefault("time_recover_idx", recover)
        return SqueezeformerConfig(input_dim=input_dim, vocab_size=vocab_size, **values)  # type: ignore[arg-type]
    return squeezeformer_config(variant, input_dim=input_dim, vocab_size=vocab_size, **given)


def build_model(
    architecture: str, variant: str | None = None, *, input_dim: int, vocab_size: int, **overrides: object
) -> nn.Module:
    config = model_config(architecture, variant, input_dim=input_dim, vocab_size=vocab_size, **overrides)
    return build_squeezeformer(config)


def config_from_dict(architecture: str, values: Mapping[str, object]) -> SqueezeformerConfig:
    """Inverse of ``dataclasses.asdict``: a saved config (e.g. from a checkpoint) exactly as it was.

    Prefer this to passing the saved dict to ``build_model`` as overrides: there ``None`` means "not
    given", so a saved ``time_recover_idx=None`` would fall back to the variant's value.
    """
    _check_architecture(architecture)
    fields = {field.name for field in dataclasses.fields(SqueezeformerConfig)}
    unknown = sorted(set(values) - fields)
    if unknown:
        raise ValueError(f"saved {architecture} config has unknown field(s) {', '.join(unknown)}")
    return SqueezeformerConfig(**values)  # type: ignore[arg-type]


def build_from_config(architecture: str, config: SqueezeformerConfig | Mapping[str, object]) -> nn.Module:
    """The model of a resolved (or saved, as a dict) config, with no variant lookup."""
    if not isinstance(config, SqueezeformerConfig):
        config = config_from_dict(architecture, config)
    _check_architecture(architecture)
    return build_squeezeformer(config)


def variant_peak_lr(architecture: str, variant: str | None) -> float | None:
    """The peak learning rate the paper trained this size with (XS/S/SM 2e-3, M 1.5e-3, ML/L 1e-3);
    None for no variant (the default sizes have no published peak)."""
    architecture = _check_architecture(architecture)
    name = _check_variant(architecture, variant)
    return None if name is None else SIZES[name].peak_lr


__all__ = [
    "ARCHITECTURES",
    "AVAILABLE",
    "DEFAULT_SIZE",
    "build_from_config",
    "build_model",
    "config_from_dict",
    "list_variants",
    "model_config",
    "variant_peak_lr",
]
