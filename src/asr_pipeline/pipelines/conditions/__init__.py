"""Stage `conditions`: features of the test split under each evaluation condition (noise, reverberation,
telephone band, codec, fast and slow speech), for `evaluate`."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
