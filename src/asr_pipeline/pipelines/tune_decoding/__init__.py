"""Stage `tune_decoding`: the LM weight and word/blank score of each beam decoder, searched on dev."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
