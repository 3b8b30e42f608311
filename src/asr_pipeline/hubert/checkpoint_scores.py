"""The validation loss of every checkpoint a HuBERT pretraining run kept (``run.keep_checkpoints``), the
``hubert_validate@<iteration>`` stage's work (``pipelines/hubert_validate`` shows the layout): a table of one
row per checkpoint, the best one as a pointer file and its weights copied (DVC outputs hold no symlinks).

Every checkpoint is scored on the run's own validation set (its dev manifests and units) with the masks the
model draws in evaluation mode (seeded, the same for every checkpoint), so the rows compare the weights alone.
``checkpoint`` paths are relative to the iteration's folder (``run/checkpoints/step-<step>.safetensors``).
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

from asr_pipeline.hubert.runs import dev_loader, load_kept_model, write_table
from asr_pipeline.io.atomic import write_json_atomic
from asr_pipeline.run_layout import KEPT_DIR, kept_checkpoints
from asr_pipeline.training.validation import validate

log = logging.getLogger(__name__)

BEST_WEIGHTS = "best.safetensors"
TABLE_COLUMNS = ("step", "epoch", "val_loss", "val_accuracy", "masked_frames", "checkpoint")


def score_checkpoints(run_dir: Path, relative_to: Path) -> list[dict[str, Any]]:
    """One row per kept checkpoint of ``run_dir``, oldest first: its validation loss and masked accuracy."""
    kept = kept_checkpoints(run_dir)
    if not kept:
        raise FileNotFoundError(
            f"{run_dir / KEPT_DIR} holds no checkpoints: the pretraining run must keep them "
            "(hubert.train.run.keep_checkpoints: true in params.yaml, or --keep-checkpoints)"
        )
    config, ctx, loader = dev_loader(run_dir)
    rows = []
    for number, path in enumerate(kept, 1):
        model, info = load_kept_model(path, config.model.architecture)
        scores = validate(model.to(ctx.device), loader, config, ctx, tokenizer=None)
        assert scores is not None  # a single process is rank 0
        rows.append({
            "step": info["step"], "epoch": info["epoch"], "val_loss": scores["val_loss"],
            "val_accuracy": scores["val_accuracy"], "masked_frames": scores["masked_frames"],
            "checkpoint": str(path.relative_to(relative_to)),
        })  # fmt: skip
        log.info(
            "checkpoint %d/%d (step %d): val_loss %.4f, masked accuracy %.2f %%",
            number, len(kept), info["step"], scores["val_loss"], scores["val_accuracy"],
        )  # fmt: skip
    return rows


def best_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The lowest validation loss (the earliest step among equals)."""
    return min(rows, key=lambda row: (row["val_loss"], row["step"]))


def validate_iteration(iteration_dir: Path) -> dict[str, Any]:
    """Score every kept checkpoint of ``iteration_dir/run``; write the table, the best pointer and weights and
    the metrics (module docstring); returns the best row."""
    rows = score_checkpoints(iteration_dir / "run", iteration_dir)
    out = iteration_dir / "validation"
    out.mkdir(parents=True, exist_ok=True)
    write_table(out / "checkpoints.tsv", TABLE_COLUMNS, rows, digits=6)
    best = best_row(rows)
    # The best weights as a file of their own: what a fine-tuning run's run.init_from names (--init-from).
    shutil.copyfile(iteration_dir / best["checkpoint"], out / BEST_WEIGHTS)
    best["weights"] = f"validation/{BEST_WEIGHTS}"
    write_json_atomic(out / "best.json", best)
    metrics = {
        "best": {k: v for k, v in best.items() if k not in ("checkpoint", "weights")},
        "checkpoints": len(rows),
    }
    write_json_atomic(iteration_dir / "validation_metrics.json", metrics)
    log.info("best of %d checkpoints: %s", len(rows), json.dumps(best))
    return best


__all__ = ["BEST_WEIGHTS", "TABLE_COLUMNS", "best_row", "score_checkpoints", "validate_iteration"]
