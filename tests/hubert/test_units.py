"""hubert.units: the recipe's k-means on a sample of utterances, units brought to the model's frame rate,
the same table from one or two worker processes, and purity / PNMI on hand-made labels."""

from __future__ import annotations

import numpy as np
import pytest

from asr_pipeline.executors import ExecutorOptions
from asr_pipeline.hubert.units import (
    NO_UNIT,
    KMeansOptions,
    fit_kmeans,
    label_shards,
    sample_ids,
    to_model_frames,
    unit_purity,
)
from asr_pipeline.io.shards import records_to_table, write_shard

CENTRES = np.array([[0.0, 0.0, 0.0], [10.0, 0.0, 0.0], [0.0, 10.0, 0.0]], dtype=np.float32)


def blob_shards(tmp_path, utterances=12, per_shard=5) -> tuple[list, dict[str, np.ndarray]]:
    """Shards of (T, 3) frames around three centres; returns the paths and each utterance's true centres."""
    rng = np.random.default_rng(0)
    truth, records = {}, []
    for i in range(utterances):
        which = rng.integers(0, 3, size=int(rng.integers(20, 40)))
        truth[f"u{i:02d}"] = which
        features = CENTRES[which] + rng.normal(0, 0.3, (len(which), 3)).astype(np.float32)
        records.append({"id": f"u{i:02d}", "features": features, "tokens": [1], "duration_ms": 10 * len(which),
                        "text": "a"})  # fmt: skip
    paths = []
    for start in range(0, utterances, per_shard):
        path = tmp_path / f"shard-{start:05d}.parquet"
        write_shard(records_to_table(records[start : start + per_shard]), path)
        paths.append(path)
    return paths, truth


def test_k_means_on_a_sample_finds_the_clusters_and_labels_every_utterance(tmp_path):
    shards, truth = blob_shards(tmp_path)
    centroids, report = fit_kmeans(shards, KMeansOptions(clusters=3, sample_fraction=0.25, n_init=3))

    assert centroids.shape == (3, 3) and report["sampled_utterances"] == 3 and report["utterances"] == 12
    assert report["inertia_per_frame"] == pytest.approx(3 * 0.3**2, rel=0.3)  # the noise's variance
    units = label_shards(shards, centroids)
    assert units.schema.names == ["id", "frames", "labels", "score"] and units.num_rows == 12
    labelled = dict(zip(units.column("id").to_pylist(), units.column("labels").to_pylist(), strict=True))
    purity = unit_purity({k: np.array(v) for k, v in labelled.items()}, truth)
    assert purity["phone_purity"] == purity["cluster_purity"] == purity["pnmi"] == pytest.approx(1.0)


def test_units_come_at_the_model_frame_rate(tmp_path):
    shards, truth = blob_shards(tmp_path, utterances=4)
    centroids, _ = fit_kmeans(shards, KMeansOptions(clusters=3, sample_fraction=1.0, n_init=2))
    frames_of = {"u00": 5, "u01": 100}  # fewer frames than units, and more; the others: as many as there are
    table = label_shards(shards, centroids, decimation=2, frames_of=frames_of)
    rows = {row["id"]: row for row in table.to_pylist()}

    assert rows["u00"]["frames"] == 5 and len(rows["u00"]["labels"]) == 5
    assert rows["u01"]["labels"][-1] == NO_UNIT and rows["u01"]["frames"] == 100
    assert rows["u02"]["frames"] == -(-len(truth["u02"]) // 2)
    assert to_model_frames(np.arange(7), 2, None).tolist() == [0, 2, 4, 6]
    assert to_model_frames(np.arange(7), 2, 6).tolist() == [0, 2, 4, 6, NO_UNIT, NO_UNIT]


def test_two_workers_label_exactly_as_one(tmp_path):
    shards, _ = blob_shards(tmp_path)
    centroids, _ = fit_kmeans(shards, KMeansOptions(clusters=3, sample_fraction=0.5, n_init=2))
    one = label_shards(shards, centroids, jobs=1)
    two = label_shards(shards, centroids, jobs=2)
    assert one.equals(two)


def test_a_local_dask_cluster_labels_exactly_as_one_process(tmp_path):
    # No address: the executor starts a LocalCluster of `jobs` workers for the call and closes it after.
    shards, _ = blob_shards(tmp_path)
    centroids, _ = fit_kmeans(shards, KMeansOptions(clusters=3, sample_fraction=0.5, n_init=2))
    one = label_shards(shards, centroids, jobs=1)
    dask = label_shards(shards, centroids, jobs=2, executor=ExecutorOptions(kind="dask"))
    assert one.equals(dask)


def test_the_sample_is_a_seeded_share_of_the_utterances():
    ids = [f"u{i}" for i in range(100)]
    assert len(sample_ids(ids, 0.1, 0)) == 10 and sample_ids(ids, 0.1, 0) == sample_ids(ids, 0.1, 0)
    assert sample_ids(ids, 0.1, 0) != sample_ids(ids, 0.1, 1)
    assert len(sample_ids(ids[:3], 0.01, 0)) == 1


def test_purity_and_pnmi_on_hand_made_labels():
    phones = {"a": np.array([0, 0, 1, 1])}
    # one unit for everything: phone purity 0.5 (the majority phone), cluster purity 1, no information
    assert unit_purity({"a": np.array([0, 0, 0, 0])}, phones) == pytest.approx(
        {"phone_purity": 0.5, "cluster_purity": 1.0, "pnmi": 0.0, "frames": 4}
    )
    # a unit per frame: every unit pure, each phone's best unit holds half of it
    got = unit_purity({"a": np.array([0, 1, 2, 3])}, phones)
    assert got["phone_purity"] == 1.0 and got["cluster_purity"] == 0.5 and got["pnmi"] == pytest.approx(1.0)


def test_too_few_frames_for_the_clusters_is_refused(tmp_path):
    shards, _ = blob_shards(tmp_path, utterances=2)
    with pytest.raises(ValueError, match="fewer than clusters=500"):
        fit_kmeans(shards, KMeansOptions(clusters=500, sample_fraction=0.5))
