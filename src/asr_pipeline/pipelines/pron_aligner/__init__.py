"""Stage `pron_aligner@<name>`: the pronunciation aligner trained with phone CTC, its phone error rate on held-out voices."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
