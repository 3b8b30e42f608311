"""An alignment recipe iteration's entry of params.yaml ``alignment.iterations`` and the file its align stage
writes, shared by the align and train_ce stages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from asr_pipeline.iterations import iteration_params

ALIGNMENT_FILE = "alignment.parquet"
# An iteration's ``align_with`` that asks for no aligning run: the linear alignment (training.linear_alignment)
# over the frames of train.model. A file, not a word, because dvc.yaml's align stage depends on ``align_with``.
LINEAR_ALIGNER = "conf/aligners/linear.yaml"


def is_linear_aligner(align_with: str | Path) -> bool:
    """Whether ``align_with`` names an aligner spec asking for the linear alignment (``aligner: linear``, as
    ``LINEAR_ALIGNER``) rather than a run dir to align with."""
    path = Path(align_with)
    if not path.is_file():
        return False
    spec = yaml.safe_load(path.read_text()) or {}
    if not isinstance(spec, dict) or spec.get("aligner") != "linear":
        raise ValueError(
            f"{path}: an aligner spec says `aligner: linear` (as {LINEAR_ALIGNER}); got {spec!r}"
        )
    return True


def alignment_iteration(params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The iteration this run is for (``alignment.current``) and its entry of ``alignment.iterations``."""
    return iteration_params(params, "alignment", "alignment_align")
