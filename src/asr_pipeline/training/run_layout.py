"""The run dir's file names, re-exported from ``asr_pipeline.run_layout`` (their home below every layer,
so ``models.loading`` can read a run dir without importing ``training/``)."""

from __future__ import annotations

from asr_pipeline.run_layout import (
    CHECKPOINT_DIR,
    CHECKPOINT_POINTER,
    CONFIG_FILE,
    INDEX_FILE,
    METRICS_FILE,
    TOKENIZER_FILE,
    WEIGHTS_FILE,
    require_checkpoint,
    resolve_run_dir,
)

__all__ = [
    "CHECKPOINT_DIR",
    "CHECKPOINT_POINTER",
    "CONFIG_FILE",
    "INDEX_FILE",
    "METRICS_FILE",
    "TOKENIZER_FILE",
    "WEIGHTS_FILE",
    "require_checkpoint",
    "resolve_run_dir",
]
