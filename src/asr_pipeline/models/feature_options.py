"""Feature extraction options for an architecture: params.yaml ``features`` names an architecture, the
features themselves only a frontend (features.extract knows no architecture). The features node and
``asr-pipeline extract-features`` both resolve it here, through the registry's ``frontend_of``."""

from __future__ import annotations

from asr_pipeline.features.extract import ExtractionOptions
from asr_pipeline.models import registry
from asr_pipeline.options import ConfigError


def extraction_options(values: dict | None, train_architecture: str | None = None) -> ExtractionOptions:
    """``values`` (params.yaml ``features``) as ExtractionOptions with its architecture's frontend.

    ``architecture`` null or absent: ``train_architecture`` (params.yaml ``train.model.architecture``, so the
    model's frontend is chosen with it), else the registry's default. A ``frontend_name`` given outright (the
    phone aligner's mfcc or fbank) wins over any architecture."""
    values = dict(values or {})
    architecture = values.pop("architecture", None)
    if architecture is not None and architecture not in registry.architecture_names():
        raise ConfigError(
            f"params.yaml features: architecture must be one of {', '.join(registry.architecture_names())}, got "
            f"{architecture!r}"
        )
    if architecture is None and train_architecture is not None:
        # An unknown name here is train.model.architecture's error, not the features section's.
        if train_architecture not in registry.architecture_names():
            raise ConfigError(
                f"params.yaml train.model.architecture: must be one of {', '.join(registry.architecture_names())}, "
                f"got {train_architecture!r} (the features stage extracts for it while features.architecture is null)"
            )
        architecture = train_architecture
    values.setdefault("frontend_name", registry.frontend_of(architecture or registry.DEFAULT_ARCHITECTURE))
    return ExtractionOptions.from_dict(values)
