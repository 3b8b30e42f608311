"""Stage `evaluate` (DVC foreach over dev/test): greedy and KenLM beam-search decoding, WER/CER."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
