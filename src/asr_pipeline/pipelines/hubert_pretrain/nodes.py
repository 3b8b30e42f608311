"""The HuBERT recipe's ``hubert_pretrain@<iteration>`` stage: ``hubert-pretrain`` trained through torchrun to
predict the iteration's units (layout: ``pipelines.hubert_units.nodes``; the run: ``hubert.pretraining``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from asr_pipeline.hubert.iterations import hubert_iteration
from asr_pipeline.hubert.pretraining import pretrain_iteration


def pretrain(hubert_dir: Path, tokenizer_model: bytes, params: dict[str, Any]) -> None:
    """Pretrain the iteration's model in ``<iteration>/run`` (its metrics: ``run/metrics.json``)."""
    name, iteration = hubert_iteration(params)
    pretrain_iteration(
        hubert_dir / name,
        tokenizer_model,
        params.get("train") or {},
        iteration.get("train") or {},
        params.get("launch") or {},
    )


__all__ = ["pretrain"]
