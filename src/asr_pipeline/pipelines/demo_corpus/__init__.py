"""Stage `demo_corpus`: synthesize the built-in English corpus with espeak-ng."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
