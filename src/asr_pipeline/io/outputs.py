"""Stage output folders."""

from __future__ import annotations

import shutil
from pathlib import Path


def empty_directory(path: Path) -> None:
    """A stage output starts empty (as DVC would leave it), so stale checkpoints never mix in (the HuBERT
    pretraining node's run dir; the train node prepares its own through ``run_training``)."""
    for child in path.iterdir():
        shutil.rmtree(child) if child.is_dir() else child.unlink()
