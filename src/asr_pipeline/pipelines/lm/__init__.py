"""Stage `lm`: a KenLM word n-gram over the training transcripts (lmplz + build_binary)."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
