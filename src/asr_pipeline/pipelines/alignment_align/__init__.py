"""The alignment recipe's align stage: Viterbi alignments of the training data with a run."""

from asr_pipeline.pipelines.alignment_align.pipeline import create_pipeline

__all__ = ["create_pipeline"]
