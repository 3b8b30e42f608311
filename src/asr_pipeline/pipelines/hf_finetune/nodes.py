"""Nodes of the ``hf_finetune@<name>`` stage (one DVC stage per entry of params.yaml ``hf_finetune.runs``; the
entry's keys: ``hf_finetune.stage``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from asr_pipeline.hf_finetune.stage import run_entry
from asr_pipeline.iterations import iteration_params


def hf_finetune_run(params: dict[str, Any], conditions: dict[str, Any], hf_finetune_dir: Path) -> None:
    """Run the current entry (``hf_finetune.current``) into ``hf_finetune_dir/<name>``, its metrics in
    ``<name>/metrics.json`` (a DVC metric of the entry's stage); its condition splits name ``conditions``."""
    name, entry = iteration_params(params, "hf_finetune", "hf_finetune", entries="runs")
    run_entry(name, entry, hf_finetune_dir / name, conditions)


__all__ = ["hf_finetune_run"]
