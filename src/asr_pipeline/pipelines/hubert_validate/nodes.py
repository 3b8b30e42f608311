"""The HuBERT recipe's ``hubert_validate@<iteration>`` stage: the validation loss of every checkpoint the
iteration's pretraining kept (``run.keep_checkpoints``), written as a table, and the best one recorded as a
pointer file (DVC outputs hold no symlinks).

Layout under ``<hubert_dir>/<iteration>/``::

    validation/checkpoints.tsv   step, epoch, val_loss, val_accuracy, masked_frames, checkpoint (one row each)
    validation/best.json         the lowest val_loss: {"checkpoint", "step", "epoch", "val_loss", "weights", ...}
    validation/best.safetensors  its weights, copied: fine-tuning starts from them (run.init_from, a
                                 ``hubert`` CTC model takes the encoder and leaves out the unit head)
    validation_metrics.json      the best row and the number of checkpoints (a DVC metrics file)

How each checkpoint is scored: ``hubert.checkpoint_scores``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from asr_pipeline.hubert.checkpoint_scores import validate_iteration
from asr_pipeline.hubert.iterations import hubert_iteration


def validate_checkpoints(hubert_dir: Path, params: dict[str, Any]) -> None:
    """Score every kept checkpoint of the iteration's run; write the table, the best pointer and the metrics
    (``hubert.checkpoint_scores.validate_iteration``)."""
    name, _ = hubert_iteration(params)
    validate_iteration(Path(hubert_dir) / name)


__all__ = ["validate_checkpoints"]
