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

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow.parquet as pq

from asr_pipeline.executors import ExecutorOptions
from asr_pipeline.features.extract import ExtractionOptions, batch_into_shards, extract_records
from asr_pipeline.hubert.abx import layer_features
from asr_pipeline.hubert.iterations import TARGETS, hubert_iteration
from asr_pipeline.hubert.phone_items import (
    align_manifest,
    frame_phones,
    item_lines,
    phone_inventory,
    summary,
)
from asr_pipeline.hubert.runs import dev_loader, load_kept_model
from asr_pipeline.hubert.units import (
    KMeansOptions,
    fit_kmeans,
    label_shards,
    unit_purity,
    write_audio_manifest,
)
from asr_pipeline.io.datasets import Manifest
from asr_pipeline.io.report import SkipReport
from asr_pipeline.io.shards import shard_name, write_shard

SPLITS = ("train", "dev")


def make_units(
    train_manifest: pl.DataFrame, dev_manifest: pl.DataFrame, hubert_dir: Path, params: dict
) -> dict[str, Any]:
    """Write the iteration's manifests, its target features, k-means centroids and units (module docstring);
    return the report (phone_alignments completes and writes it)."""
    name, iteration = hubert_iteration(params)
    units = iteration["units"]
    targets = units.get("targets", "mfcc")
    if targets not in TARGETS:
        raise ValueError(
            f"hubert.iterations.{name}.units.targets={targets!r}: one of {', '.join(TARGETS)} (mfcc: MFCC-39, "
            "iteration 1; layer: the best ABX layer of the iteration whose abx folder units.source names)"
        )
    if not isinstance(units.get("source"), str):
        raise ValueError(
            f"hubert.iterations.{name}.units.source is missing: the folder its targets come from, which dvc.yaml "
            "tracks (mfcc: the transcripts folder, e.g. data/02_transcripts; layer: an earlier iteration's abx "
            "folder, e.g. data/11_hubert/it1/abx)"
        )
    output = hubert_dir / name / "units"
    shutil.rmtree(output, ignore_errors=True)  # a stage output starts empty
    jobs = int(params.get("jobs", 1))
    executor = ExecutorOptions.from_dict(params.get("executor"))
    manifests = {"train": train_manifest, "dev": dev_manifest}
    report: dict[str, Any] = {"iteration": name, "targets": targets, "extraction": {}, "units": {}}
    shards: dict[str, list[Path]] = {}
    for split, manifest in manifests.items():
        manifest_path = output / "manifests" / f"{split}.jsonl"
        write_audio_manifest(manifest.iter_rows(named=True), manifest_path)
        if targets == "layer":
            shards[split], report["extraction"][split] = _layer_features(
                Path(units["source"]), manifest_path, output / "features" / split
            )
        else:
            shards[split], report["extraction"][split] = _target_features(
                manifest, output / "features" / split, targets, jobs, executor
            )
    kmeans = KMeansOptions(
        **{key: units[key] for key in ("clusters", "sample_fraction", "seed") if key in units}
    )
    centroids, report["kmeans"] = fit_kmeans(shards["train"], kmeans)
    np.save(output / "centroids.npy", centroids)
    for split in SPLITS:
        table = label_shards(
            shards[split], centroids, decimation=TARGETS[targets], jobs=jobs, executor=executor
        )
        pq.write_table(table, output / f"{split}.parquet")
        report["units"][split] = {"utterances": table.num_rows, "mean_distance": _mean(table.column("score"))}
    return report  # written to report.json by phone_alignments, which adds the phones' scores


def phone_alignments(
    report: dict[str, Any], dev_raw_manifest: Manifest, hubert_dir: Path, params: dict
) -> None:
    """The dev split's phone alignments, when its raw manifest names each utterance's espeak-ng voice (the
    demo corpus): the ABX item file, and phone purity / PNMI of the iteration's dev units in report.json.
    Any other corpus gets the reason in the report instead (nothing is guessed)."""
    name, _ = hubert_iteration(params)
    output = hubert_dir / name / "units"
    skips = SkipReport(strict=False)
    manifest = Path(dev_raw_manifest.path)
    utterances, alignments = align_manifest(manifest, skips, jobs=int(params.get("jobs", 1)))
    if not alignments:
        reason = f"{manifest}: no utterance could be aligned (it names no espeak-ng voices, or none matched)"
        report["phones"] = {**skips.to_dict(), "reason": reason}
    else:
        speakers = {u.id: u.speaker for u in utterances}
        inventory = phone_inventory(alignments.values())
        (output / "phones").mkdir(parents=True, exist_ok=True)
        items = item_lines(alignments, speakers)  # the phones that hold a 50 Hz frame
        (output / "phones" / "dev.item").write_text("\n".join(items) + "\n")
        (output / "phones" / "inventory.json").write_text(json.dumps(inventory, indent=1))
        dev_units = pq.read_table(output / "dev.parquet", columns=["id", "labels"]).to_pylist()
        units = {row["id"]: np.asarray(row["labels"]) for row in dev_units}
        report["phones"] = {
            **summary(alignments, inventory),
            "items": len(items) - 1,
            **unit_purity(units, frame_phones(alignments, inventory)),
            **skips.to_dict(),
        }
    (output / "report.json").write_text(json.dumps(report, indent=2, sort_keys=True))


def _target_features(
    manifest: pl.DataFrame, directory: Path, targets: str, jobs: int, executor: ExecutorOptions
) -> tuple[list[Path], dict]:
    """Shards of the ``targets`` features of the manifest's audio, and the extraction's skip report."""
    options = ExtractionOptions(frontend_name=targets, jobs=jobs, executor=executor)
    skips = SkipReport(strict=False)
    records = extract_records(
        manifest.iter_rows(named=True), None, options, skips, total=manifest.height, desc=targets
    )
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for index, table in enumerate(batch_into_shards(records, options.shard_size)):
        paths.append(directory / shard_name(index))
        write_shard(table, paths[-1])
    return paths, skips.to_dict()


def _layer_features(abx_dir: Path, manifest: Path, directory: Path) -> tuple[list[Path], dict[str, Any]]:
    """Shards of the best ABX layer's frames (50 Hz, the model's own rate) of the earlier iteration's best
    checkpoint (``abx_dir/best_layer.json``) for the manifest's utterances."""
    best = json.loads((abx_dir / "best_layer.json").read_text())
    earlier = abx_dir.parent
    config, ctx, loader = dev_loader(earlier / "run", manifests=[str(manifest)])
    model, _ = load_kept_model(earlier / best["checkpoint"], config.model.architecture)
    [frames] = layer_features(model.to(ctx.device).hubert, loader, ctx.device, only_layer=best["layer"])
    records = (
        {"id": utterance, "features": features.numpy(), "tokens": [], "text": "",
         "duration_ms": 20 * features.shape[0]}
        for utterance in _manifest_ids(manifest)
        if (features := frames.get(utterance)) is not None
    )  # fmt: skip
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for index, table in enumerate(batch_into_shards(records, ExtractionOptions().shard_size)):
        paths.append(directory / shard_name(index))
        write_shard(table, paths[-1])
    report = {
        "utterances": len(frames),
        "layer": best["layer"],
        "checkpoint": str(earlier / best["checkpoint"]),
    }
    return paths, report


def _manifest_ids(manifest: Path) -> list[str]:
    return [json.loads(line)["id"] for line in manifest.read_text().splitlines() if line.strip()]


def _mean(column) -> float:
    values = column.to_numpy()
    return float(values.mean()) if len(values) else 0.0
