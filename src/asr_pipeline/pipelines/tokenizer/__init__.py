"""Stage `tokenizer`: SentencePiece over the transcript corpus."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
