"""The HuBERT recipe's hubert_pretrain stage: masked prediction of an iteration's units."""

from asr_pipeline.pipelines.hubert_pretrain.pipeline import create_pipeline

__all__ = ["create_pipeline"]
