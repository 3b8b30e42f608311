"""Nodes of the HuBERT recipe's ``hubert_units@<iteration>`` stage (dvc.yaml; ``hubert/units.py``).

``params.yaml`` ``hubert.iterations`` names the iterations; DVC runs each with
``--params=hubert.current=<iteration>`` (``asr_pipeline.iterations``). An iteration's ``targets`` says what it
clusters: ``mfcc`` (iteration 1: MFCC-39 of the audio, 100 Hz, every second unit kept) or ``layer`` (iteration 2:
the frames of the best ABX layer of an earlier iteration's best checkpoint, 50 Hz; ``source`` names that
iteration's ``abx`` folder). ``source`` is required either way: dvc.yaml tracks it as the units' input (mfcc: the
transcripts folder). Layout under ``paths.hubert`` (the catalog's ``hubert_dir``)::

    <iteration>/units/manifests/{train,dev}.jsonl   the audio the pretraining reads (raw manifests)
    <iteration>/units/features/{train,dev}/          the clustered frame features (shards)
    <iteration>/units/centroids.npy                  the k-means centroids (K, F)
    <iteration>/units/{train,dev}.parquet            every utterance's unit per 20 ms frame (data.alignment)
    <iteration>/units/report.json                    k-means inertia, sample sizes, extraction skips, and
                                                     the dev units' phone purity and PNMI (below)
    <iteration>/units/phones/dev.item                the dev split's ABX item file (hubert.phone_items)
    <iteration>/units/phones/inventory.json          phone -> index of the purity/PNMI labels
    <iteration>/run/                                 the pretraining run (hubert_pretrain@<iteration>)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from asr_pipeline.executors import ExecutorOptions
from asr_pipeline.hubert.iterations import hubert_iteration
from asr_pipeline.hubert.unit_folder import write_phone_scores, write_units
from asr_pipeline.io.datasets import Manifest


def make_units(
    train_manifest: pl.DataFrame, dev_manifest: pl.DataFrame, hubert_dir: Path, params: dict
) -> dict[str, Any]:
    """Write the iteration's manifests, its target features, k-means centroids and units (module docstring;
    ``hubert.unit_folder.write_units``); return the report (phone_alignments completes and writes it)."""
    name, iteration = hubert_iteration(params)
    return write_units(
        name,
        iteration["units"],
        hubert_dir / name / "units",
        {"train": train_manifest, "dev": dev_manifest},
        jobs=int(params.get("jobs", 1)),
        executor=ExecutorOptions.from_dict(params.get("executor")),
    )


def phone_alignments(
    report: dict[str, Any], dev_raw_manifest: Manifest, hubert_dir: Path, params: dict
) -> None:
    """The dev split's phone alignments, when its raw manifest names each utterance's espeak-ng voice (the
    demo corpus): the ABX item file, and phone purity / PNMI of the iteration's dev units in report.json
    (``hubert.unit_folder.write_phone_scores``). Any other corpus gets the reason in the report instead."""
    name, _ = hubert_iteration(params)
    output = hubert_dir / name / "units"
    write_phone_scores(report, Path(dev_raw_manifest.path), output, jobs=int(params.get("jobs", 1)))


__all__ = ["make_units", "phone_alignments"]
