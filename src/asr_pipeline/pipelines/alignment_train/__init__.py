"""The alignment recipe's train_ce stage: a frame-wise cross-entropy model on an alignment."""

from asr_pipeline.pipelines.alignment_train.pipeline import create_pipeline

__all__ = ["create_pipeline"]
