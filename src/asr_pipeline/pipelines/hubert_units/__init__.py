"""The HuBERT recipe's hubert_units stage: an iteration's targets clustered into units."""

from asr_pipeline.pipelines.hubert_units.pipeline import create_pipeline

__all__ = ["create_pipeline"]
