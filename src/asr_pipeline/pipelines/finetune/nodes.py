"""Nodes of the ``finetune@<name>`` stage (one DVC stage per entry of params.yaml ``finetune.runs``).

An entry names the run to start from and the data to adapt it to::

    noisy_lora:
      base: data/07_train/run                # a run dir (or .safetensors file) to start from
      corpus: {split: dev, condition: noisy, val_share: 0.2}
      evaluate: data/04_conditions/noisy     # feature shards scored before and after
      train: {finetune: {method: lora}, optim: {epochs: 8}}   # over params.yaml train

``corpus`` is either a split of our transcripts featurized under one of params.yaml ``conditions`` (the demo's
domain shift: the dev split's held-out voices in noise or over a telephone line, cut by utterance id into
training and validation parts), or ``{train_manifests: [...], val_manifests: [...]}``: any manifests the
engine reads (feature shards or raw manifests). The model section comes from the base run, so only what
changes needs saying; the run starts from ``base`` (``run.init_from``) with the base run's tokenizer.

Layout under ``paths.finetune``/<name>: ``data/{train,val}/`` (a featurized corpus), ``run/`` (the run dir), and
the metrics (``metrics.json``): greedy WER/CER on ``evaluate`` before (the base run) and after (the
fine-tuned run's best checkpoint), trainable and total parameters, the method and LoRA settings, the
early-stopping decision, training time and each rank's peak memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from asr_pipeline.iterations import iteration_params
from asr_pipeline.training.finetune_stage import run_finetune_entry, validation_part


def finetune_entry(params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The run this stage is for (``finetune.current``) and its entry of ``finetune.runs``."""
    return iteration_params(params, "finetune", "finetune", entries="runs")


def finetune_run(
    dev_manifest: pl.DataFrame,
    test_manifest: pl.DataFrame,
    tokenizer_model: bytes,
    features_params: dict,
    tokenizer_params: dict,
    architecture: str | None,
    conditions: dict[str, Any],
    train_params: dict[str, Any],
    params: dict[str, Any],
    finetune_dir: Path,
) -> None:
    """Fine-tune the current entry under ``finetune_dir/<name>`` (``training.finetune_stage.run_finetune_entry``:
    featurize, train through torchrun, score before and after). Its metrics go to ``<name>/metrics.json`` (a DVC
    metric of the entry's stage, beside its outputs), not through the catalog: the node declares no outputs."""
    name, entry = finetune_entry(params)
    run_finetune_entry(
        name,
        entry,
        finetune_dir / name,
        {"dev": dev_manifest, "test": test_manifest},
        (tokenizer_model, features_params, tokenizer_params, architecture),
        conditions,
        train_params,
    )


__all__ = ["finetune_entry", "finetune_run", "validation_part"]
