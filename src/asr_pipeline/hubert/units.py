"""HuBERT's targets: k-means clusters of frame features, and every utterance's unit per model frame.

Iteration 1 clusters MFCC-39 frames (100 Hz), iteration 2 a pretrained model's layer outputs (50 Hz). The
recipe (fairseq ``learn_kmeans.py``, minimal_hubert ``kmeans.py``): scikit-learn ``MiniBatchKMeans`` with
k-means++ initialisation, 20 initialisations, batches of 10,000 frames, at most 100 iterations, no
tolerance stop but 100 batches without improvement, no reassignment, fitted on the frames of a random
``sample_fraction`` of the utterances (10 %). The fitted model is kept as its centroids (``.npy``): labelling
is the nearest centroid by Euclidean distance, as ``MiniBatchKMeans.predict`` does.

Units are then brought to the model's frame rate: ``decimation`` 2 keeps every second unit (100 Hz MFCC ->
50 Hz, minimal_hubert's ``gather_every(2)``), and the sequence is cut or filled with -1 (no target) to the
number of frames the model makes of the utterance (``frames_of``). The units file has the alignment schema
(``training.alignment.ALIGNMENT_SCHEMA``: id, frames, labels, score = the mean distance to the centroid),
so the training engine reads it as ``data.alignment``.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import torch
from tqdm import tqdm

from asr_pipeline.executors import ExecutorOptions, map_ordered
from asr_pipeline.io.shards import iter_examples, read_metadata
from asr_pipeline.training.alignment import ALIGNMENT_SCHEMA

log = logging.getLogger(__name__)

NO_UNIT = -1  # a model frame without a target (the features ran out): not predicted


@dataclass(frozen=True)
class KMeansOptions:
    """params.yaml ``hubert`` iteration: the clustering (recipe values by default)."""

    clusters: int = 100
    sample_fraction: float = 0.1  # of the utterances, drawn by seed
    seed: int = 0
    batch_size: int = 10_000
    max_iter: int = 100
    n_init: int = 20
    max_no_improvement: int = 100

    def __post_init__(self) -> None:
        if self.clusters < 2:
            raise ValueError(f"hubert k-means: clusters must be >= 2, got {self.clusters}")
        if not 0.0 < self.sample_fraction <= 1.0:
            raise ValueError(
                f"hubert k-means: sample_fraction must lie in (0, 1], got {self.sample_fraction}"
            )


def sample_ids(ids: Sequence[str], fraction: float, seed: int) -> list[str]:
    """A ``fraction`` of ``ids`` (at least one), drawn by ``seed``, in their original order."""
    count = max(1, round(len(ids) * fraction))
    chosen = np.random.default_rng(seed).choice(len(ids), size=count, replace=False)
    return [ids[i] for i in sorted(chosen)]


def shard_frames(
    shards: Iterable[str | Path], keep: set[str] | None = None
) -> Iterable[tuple[str, np.ndarray]]:
    """(id, (T, F) features) of every utterance in ``shards`` (those in ``keep``, when given)."""
    for shard in shards:
        for example in iter_examples(shard):
            if keep is None or example["id"] in keep:
                yield example["id"], example["features"]


def fit_kmeans(shards: Sequence[str | Path], options: KMeansOptions) -> tuple[np.ndarray, dict[str, Any]]:
    """Fit the recipe's k-means on a sample of the utterances in ``shards``; (K, F) float32 centroids and
    a report (utterances and frames used, inertia per frame on the sample, seconds)."""
    from sklearn.cluster import MiniBatchKMeans  # a heavy import, only for the stage that fits

    started = time.perf_counter()
    ids = [i for shard in shards for i in read_metadata(shard).column("id").to_pylist()]
    if not ids:
        raise ValueError(
            f"hubert k-means: no utterances in {len(shards)} shard(s) {list(map(str, shards))[:3]}"
        )
    chosen = sample_ids(ids, options.sample_fraction, options.seed)
    frames = np.concatenate([features for _, features in shard_frames(shards, set(chosen))])
    if len(frames) < options.clusters:
        raise ValueError(
            f"hubert k-means: {len(frames)} frames in the {len(chosen)} sampled utterances are fewer than "
            f"clusters={options.clusters}; raise sample_fraction or lower clusters"
        )
    kmeans = MiniBatchKMeans(
        n_clusters=options.clusters, init="k-means++", max_iter=options.max_iter, batch_size=options.batch_size,
        compute_labels=False, random_state=options.seed, tol=0.0, max_no_improvement=options.max_no_improvement,
        n_init=options.n_init, reassignment_ratio=0.0,
    )  # fmt: skip
    kmeans.fit(frames)
    report = {
        "clusters": options.clusters,
        "utterances": len(ids),
        "sampled_utterances": len(chosen),
        "sampled_frames": len(frames),
        "inertia_per_frame": float(-kmeans.score(frames) / len(frames)),
        "seconds": time.perf_counter() - started,
    }
    return kmeans.cluster_centers_.astype(np.float32), report


def nearest_units(features: np.ndarray, centroids: np.ndarray) -> tuple[np.ndarray, float]:
    """(T, F) frames -> (T,) index of the nearest centroid and the mean distance to it."""
    if len(features) == 0:
        return np.zeros(0, dtype=np.int64), 0.0
    frames = torch.as_tensor(np.array(features, dtype=np.float32))  # a writable copy of a shard's view
    distances = torch.cdist(frames[None], torch.from_numpy(centroids)[None])[0]  # (T, K)
    nearest, units = distances.min(dim=1)
    return units.numpy(), float(nearest.mean())


def to_model_frames(units: np.ndarray, decimation: int, frames: int | None) -> np.ndarray:
    """Every ``decimation``-th unit, cut or filled with ``NO_UNIT`` to ``frames`` (None: as many as there are)."""
    kept = units[::decimation]
    if frames is None:
        return kept
    out = np.full(frames, NO_UNIT, dtype=np.int64)
    out[: min(frames, len(kept))] = kept[:frames]
    return out


def _label_shard(
    shard: str, centroids: np.ndarray, decimation: int, frames_of: Mapping[str, int] | None
) -> list[dict[str, Any]]:
    rows = []
    for utterance, features in shard_frames([shard]):
        units, distance = nearest_units(features, centroids)
        frames = None if frames_of is None else frames_of.get(utterance)
        labels = to_model_frames(units, decimation, frames)
        rows.append({"id": utterance, "frames": len(labels), "labels": labels.tolist(), "score": distance})
    return rows


def label_shards(
    shards: Sequence[str | Path],
    centroids: np.ndarray,
    decimation: int = 1,
    frames_of: Mapping[str, int] | None = None,
    jobs: int = 1,
    executor: ExecutorOptions | None = None,
) -> pa.Table:
    """Every utterance of ``shards`` as units at the model's frame rate (module docstring), in the
    alignment schema. Shards are labelled in parallel by ``jobs`` worker processes, or on a Dask cluster
    (``executor``, asr_pipeline.executors); the table is the same either way."""
    frames = None if frames_of is None else dict(frames_of)
    work = [str(Path(shard).resolve()) for shard in shards]  # absolute: a Dask worker runs elsewhere
    rows: list[dict[str, Any]] = []
    results = map_ordered(
        _label_shard,
        work,
        centroids,
        decimation,
        frames,
        jobs=jobs,
        executor=executor,
        describe=lambda shard: f"labelling {shard}",
    )
    for _, shard_rows in tqdm(results, total=len(work), desc="units", unit="shard", disable=None):
        rows.extend(shard_rows)
    return pa.Table.from_pylist(rows, schema=ALIGNMENT_SCHEMA)


def unit_purity(units: Mapping[str, np.ndarray], phones: Mapping[str, np.ndarray]) -> dict[str, float]:
    """How well units tell phones apart, over frames with both (HuBERT paper §IV-B): phone purity (the
    share of frames whose unit's most frequent phone is theirs), cluster purity (the same with the roles
    swapped) and phone-normalised mutual information I(phone; unit) / H(phone)."""
    pairs = [
        (phone[: min(len(phone), len(unit))], unit[: min(len(phone), len(unit))])
        for utterance, unit in units.items()
        if (phone := phones.get(utterance)) is not None
    ]
    phone = np.concatenate([p for p, _ in pairs])
    unit = np.concatenate([u for _, u in pairs])
    valid = (phone >= 0) & (unit >= 0)
    phone, unit = phone[valid], unit[valid]
    joint = np.zeros((phone.max() + 1, unit.max() + 1))
    np.add.at(joint, (phone, unit), 1)
    joint /= joint.sum()
    p_phone, p_unit = joint.sum(1), joint.sum(0)
    nonzero = joint > 0
    mutual = (joint[nonzero] * np.log(joint[nonzero] / np.outer(p_phone, p_unit)[nonzero])).sum()
    entropy = -(p_phone[p_phone > 0] * np.log(p_phone[p_phone > 0])).sum()
    return {
        "phone_purity": float(joint.max(0).sum()),
        "cluster_purity": float(joint.max(1).sum()),
        "pnmi": float(mutual / entropy) if entropy > 0 else 0.0,
        "frames": len(phone),
    }


def write_audio_manifest(rows: Iterable[Mapping[str, Any]], path: str | Path) -> int:
    """A JSONL manifest of audio records that ``io.manifests`` reads (``id``, ``audio_path`` relative to the
    manifest's folder, so the folder can move with its audio, ``text``). ``rows``: the transcripts stage's
    manifest rows (project-relative ``audio_path``); a segment of a longer file (a Kaldi ``segments``
    line) is refused, naming it: the raw-audio training path reads whole files. Returns the count."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w") as out:
        for row in rows:
            if row.get("offset_sec") is not None or row.get("audio_path") is None:
                raise ValueError(
                    f"{row.get('location', row['id'])}: HuBERT's manifests take whole audio files; this record "
                    "is a segment of one or has no audio file (features-only corpora cannot be pretrained on)"
                )
            audio = os.path.relpath(row["audio_path"], path.parent)
            out.write(json.dumps({"id": row["id"], "audio_path": audio, "text": row["text"]}) + "\n")
            count += 1
    return count


__all__ = [
    "NO_UNIT",
    "KMeansOptions",
    "fit_kmeans",
    "label_shards",
    "nearest_units",
    "sample_ids",
    "to_model_frames",
    "unit_purity",
    "write_audio_manifest",
]
