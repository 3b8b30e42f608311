"""An alignment recipe iteration's entry of params.yaml ``alignment.iterations`` and the file its align stage
writes, shared by the align and train_ce stages."""

from __future__ import annotations

from typing import Any

from asr_pipeline.iterations import iteration_params

ALIGNMENT_FILE = "alignment.parquet"
# An iteration's ``align_with`` that asks for no aligning run: the linear alignment (training.linear_alignment)
# over the frames of the model the iteration trains.
LINEAR_ALIGNMENT = "linear"


def alignment_iteration(params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The iteration this run is for (``alignment.current``) and its entry of ``alignment.iterations``."""
    return iteration_params(params, "alignment", "alignment_align")
