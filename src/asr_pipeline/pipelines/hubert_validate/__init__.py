"""The HuBERT recipe's hubert_validate stage: every kept checkpoint's validation loss, and the best one."""

from asr_pipeline.pipelines.hubert_validate.pipeline import create_pipeline

__all__ = ["create_pipeline"]
