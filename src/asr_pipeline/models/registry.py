"""Architecture + named variant -> config -> model. The one place the CLI, the Kedro train node and the
training worker turn ``--architecture``/``--variant`` flags into a model.

    config = model_config("squeezeformer", "xs", input_dim=80, vocab_size=257, dropout=0.0)
    model = build_model("squeezeformer", "demo", input_dim=80, vocab_size=257)

Overrides are config fields and win over the variant's numbers; ``None`` means "not given", so optional
command-line flags can be passed straight through. Configs are frozen dataclasses of plain values:
``dataclasses.asdict`` -> JSON -> ``build_from_config`` rebuilds the same model from a run directory.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from torch import nn

from asr_pipeline.models.squeezeformer import (
    SIZES,
    SqueezeformerConfig,
    build_squeezeformer,
    squeezeformer_config,
)

ARCHITECTURES = ("squeezeformer", "zipformer", "paraformer", "w2v-bert")
AVAILABLE = ("squeezeformer",)
DEFAULT_VARIANT = {"squeezeformer": "xs"}  # what variant=None means: the config dataclass's defaults


def _check_architecture(architecture: str) -> str:
    name = architecture.lower()
    if name not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {architecture!r}; choose one of: {', '.join(ARCHITECTURES)}")
    if name not in AVAILABLE:
        raise NotImplementedError(f"{name} is not available yet; use --architecture squeezeformer")
    return name


def _check_variant(architecture: str, variant: str | None) -> str:
    name = DEFAULT_VARIANT[architecture] if variant is None else variant.lower()
    valid = list_variants(architecture)
    if name not in valid:
        raise ValueError(f"unknown {architecture} variant {variant!r}; choose one of: {', '.join(valid)}")
    return name


def list_variants(architecture: str) -> list[str]:
    """Named sizes, smallest paper size first, then the CPU sizes."""
    _check_architecture(architecture)
    return list(SIZES)


def model_config(
    architecture: str, variant: str | None = None, *, input_dim: int, vocab_size: int, **overrides: object
) -> SqueezeformerConfig:
    """The resolved config of ``variant`` (None: the default variant) with ``overrides`` applied."""
    architecture = _check_architecture(architecture)
    variant = _check_variant(architecture, variant)
    given = {key: value for key, value in overrides.items() if value is not None}
    fields = {field.name for field in dataclasses.fields(SqueezeformerConfig)}
    unknown = sorted(set(given) - fields)
    if unknown:
        raise ValueError(
            f"unknown {architecture} config field(s) {', '.join(unknown)}; valid fields: {', '.join(sorted(fields))}"
        )
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
    """The peak learning rate the paper trained this size with (XS/S/SM 2e-3, M 1.5e-3, ML/L 1e-3)."""
    architecture = _check_architecture(architecture)
    return SIZES[_check_variant(architecture, variant)].peak_lr
