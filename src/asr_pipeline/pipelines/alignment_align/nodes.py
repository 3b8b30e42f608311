"""Nodes of the alignment recipe (dvc.yaml's ``align`` and ``train_ce`` stages), one iteration per run: ``align@<it>``.

``params.yaml`` ``alignment.iterations`` names the iterations in order; each says which run to align with
(``align_with``: the main ``train`` stage's run for the first, the previous iteration's for the others; or
``conf/aligners/linear.yaml``, the classic bootstrap: each utterance's tokens spread evenly over the frames of
``train.model``, ``training.linear_alignment``) and what its frame-wise training changes in ``train``
(``train``: the same sections as ``params.yaml train``).
DVC runs each stage with ``--params=alignment.current=<iteration>`` (a Kedro runtime parameter), so one
pipeline per stage (this one, and ``alignment_train``) serves every iteration, and each iteration's stages
track only that iteration's params.

Layout under ``paths.alignment`` (the catalog's ``alignment_dir``)::

    <iteration>/alignment/alignment.parquet   frame labels of every training utterance (training.alignment)
    <iteration>/alignment/report.json         utterances aligned and skipped, mean path log-prob per frame
    <iteration>/run/                          the frame-wise trained run (a run dir like the train stage's)
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from asr_pipeline.executors import ExecutorOptions
from asr_pipeline.training.alignment import align_shards
from asr_pipeline.training.alignment_iterations import ALIGNMENT_FILE, alignment_iteration, is_linear_aligner
from asr_pipeline.training.linear_alignment import linear_align_shards, model_output_lengths

REPORT_FILE = "report.json"


def align_iteration(
    train_shards: list[str], alignment_dir: Path, train_params: dict[str, Any], params: dict[str, Any]
) -> None:
    """Align the training shards with the iteration's ``align_with`` run, or linearly over the frames of
    ``train_params``' model; the report lands beside them."""
    name, iteration = alignment_iteration(params)
    output = alignment_dir / name / "alignment"
    linear = is_linear_aligner(iteration["align_with"])
    if linear and "model" in (iteration.get("train") or {}):  # dvc.yaml's align stage tracks train.model only
        raise ValueError(
            f"alignment.iterations.{name}: a linear-aligned iteration trains train.model (its frames make the "
            "alignment); set the model there, not in the iteration's `train`"
        )
    shutil.rmtree(output, ignore_errors=True)  # a stage output starts empty
    if linear:
        report = linear_align_shards(
            train_shards, output / ALIGNMENT_FILE, *model_output_lengths(train_params)
        )
    else:
        report = align_shards(
            iteration["align_with"],
            train_shards,
            output / ALIGNMENT_FILE,
            batch_size=int(params.get("batch_size", 16)),
            jobs=int(params.get("jobs", 1)),
            executor=ExecutorOptions.from_dict(params.get("executor")),
        )
    summary = {"iteration": name, **report.to_dict()}
    (output / REPORT_FILE).write_text(json.dumps(summary, indent=2, sort_keys=True))
