"""Stage `transcripts`: raw manifests -> normalized per-split manifests + the tokenizer corpus."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
