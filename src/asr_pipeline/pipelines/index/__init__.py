"""Stage `index`: a length index over the training shards, for length-sorted batching."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
