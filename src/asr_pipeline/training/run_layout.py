"""File names inside a run directory, shared by the worker, the Kedro train node and the CLI, and the one
way to turn what a user points at (``--resume-from``, ``--init-from``, ``decode --run-dir``) into a run dir.

Kept free of heavy imports so ``asr-pipeline --help`` and the Kedro node can name them cheaply.
"""

from __future__ import annotations

from pathlib import Path

CONFIG_FILE = "training_config.json"  # the resolved TrainConfig, written before training starts
METRICS_FILE = "metrics.json"  # final metrics, written last by rank 0
TOKENIZER_FILE = "tokenizer.model"  # the SentencePiece model the run was trained with
INDEX_FILE = "length_index.parquet"  # the length index the run batched with
CHECKPOINT_DIR = "checkpoint_latest"  # the latest checkpoint's folder (training.checkpoint)
CHECKPOINT_POINTER = "checkpoint_latest.json"  # written last: the checkpoint's commit point


def resolve_run_dir(path: str | Path) -> Path:
    """The run dir ``path`` stands for: the run dir itself, its ``checkpoint_latest/`` folder, or its
    ``checkpoint_latest.json`` pointer (the reference trainer documents ``--resume-from
    runs/x/checkpoint_latest``). Other paths come back unchanged; nothing is read."""
    path = Path(path)
    return path.parent if path.name in (CHECKPOINT_DIR, CHECKPOINT_POINTER) else path


def require_checkpoint(path: str | Path, what: str) -> Path:
    """``resolve_run_dir(path)``, checked to hold a finished checkpoint; ``what`` names the option in the
    FileNotFoundError (e.g. "run.resume_from (--resume-from)")."""
    run_dir = resolve_run_dir(path)
    if not (run_dir / CHECKPOINT_POINTER).is_file():
        raise FileNotFoundError(
            f"{what} {str(path)!r}: {run_dir} holds no finished checkpoint ({CHECKPOINT_POINTER}); pass a "
            f"run dir that does, its {CHECKPOINT_DIR}/ folder or its {CHECKPOINT_POINTER}"
        )
    return run_dir
