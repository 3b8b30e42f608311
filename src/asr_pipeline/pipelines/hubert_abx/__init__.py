"""The HuBERT recipe's hubert_abx stage: ABX error per layer of the best checkpoint, and MFCC's."""

from asr_pipeline.pipelines.hubert_abx.pipeline import create_pipeline

__all__ = ["create_pipeline"]
