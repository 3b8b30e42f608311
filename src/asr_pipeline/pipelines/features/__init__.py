"""Stage `features`: normalized manifests -> Parquet feature shards per split."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
