"""An iteration's ``units`` folder of the HuBERT recipe (``pipelines/hubert_units`` shows its layout): the audio
manifests the pretraining reads, the target features (MFCC-39 of the audio, or the best ABX layer of an earlier
iteration's best checkpoint), their k-means centroids and every utterance's units at 50 Hz (``hubert.units``),
then the dev units' phone purity and PNMI where the dev split's phones can be aligned (``hubert.phone_items``).
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
from asr_pipeline.hubert.iterations import TARGETS
from asr_pipeline.hubert.phone_items import align_manifest, frame_phones, item_lines, phone_inventory, summary
from asr_pipeline.hubert.runs import dev_loader, load_kept_model
from asr_pipeline.hubert.units import (
    KMeansOptions,
    fit_kmeans,
    label_shards,
    unit_purity,
    write_audio_manifest,
)
from asr_pipeline.io.report import SkipReport
from asr_pipeline.io.shards import shard_name, write_shard

SPLITS = ("train", "dev")


def check_units_entry(name: str, units: dict[str, Any]) -> str:
    """The entry's ``targets`` (mfcc by default), once ``units`` names known targets and a ``source``."""
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
    return targets


def write_units(
    name: str,
    units: dict[str, Any],
    output: Path,
    manifests: dict[str, pl.DataFrame],
    jobs: int = 1,
    executor: ExecutorOptions | None = None,
) -> dict[str, Any]:
    """Write iteration ``name``'s manifests, target features, k-means centroids and units of ``manifests``
    (train and dev) under ``output``, emptied first; the report (``write_phone_scores`` completes it)."""
    targets = check_units_entry(name, units)
    executor = executor or ExecutorOptions()
    shutil.rmtree(output, ignore_errors=True)  # a stage output starts empty
    report: dict[str, Any] = {"iteration": name, "targets": targets, "extraction": {}, "units": {}}
    shards: dict[str, list[Path]] = {}
    for split, manifest in manifests.items():
        manifest_path = output / "manifests" / f"{split}.jsonl"
        write_audio_manifest(manifest.iter_rows(named=True), manifest_path)
        if targets == "layer":
            shards[split], report["extraction"][split] = layer_target_features(
                Path(units["source"]), manifest_path, output / "features" / split
            )
        else:
            shards[split], report["extraction"][split] = target_features(
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
        report["units"][split] = {
            "utterances": table.num_rows,
            "mean_distance": mean_of(table.column("score")),
        }
    return report


def write_phone_scores(report: dict[str, Any], dev_manifest: Path, output: Path, jobs: int = 1) -> None:
    """The dev split's phone alignments, when its raw manifest names each utterance's espeak-ng voice (the
    demo corpus): the ABX item file, and phone purity / PNMI of the units folder's dev units, added to
    ``report``, which goes to ``output/report.json``. Any other corpus gets the reason in the report instead
    (nothing is guessed)."""
    skips = SkipReport(strict=False)
    utterances, alignments = align_manifest(dev_manifest, skips, jobs=jobs)
    if not alignments:
        reason = (
            f"{dev_manifest}: no utterance could be aligned (it names no espeak-ng voices, or none matched)"
        )
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


def target_features(
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


def layer_target_features(
    abx_dir: Path, manifest: Path, directory: Path
) -> tuple[list[Path], dict[str, Any]]:
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
        for utterance in manifest_ids(manifest)
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


def manifest_ids(manifest: Path) -> list[str]:
    return [json.loads(line)["id"] for line in manifest.read_text().splitlines() if line.strip()]


def mean_of(column) -> float:
    values = column.to_numpy()
    return float(values.mean()) if len(values) else 0.0


__all__ = [
    "SPLITS",
    "check_units_entry",
    "layer_target_features",
    "manifest_ids",
    "mean_of",
    "target_features",
    "write_phone_scores",
    "write_units",
]
