"""hubert.unit_folder: an iteration's units folder from MFCC targets (manifests, features, centroids, 50 Hz
units and the report), the entry checks, and a dev split without voices getting the reason instead of phone
scores (layer targets and voiced phone scores: tests/pipelines/test_hubert_pipelines.py)."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest
import soundfile as sf

from asr_pipeline.hubert.unit_folder import check_units_entry, manifest_ids, write_phone_scores, write_units

RATE = 16000


def tone_manifest(root, split: str, count: int) -> pl.DataFrame:
    """``count`` WAV files of 0.5 s, a different pitch each, as the transcripts stage's manifest."""
    rows = []
    for i in range(count):
        path = root / f"{split}-{i}.wav"
        t = np.arange(RATE // 2) / RATE
        sf.write(path, (0.3 * np.sin(2 * np.pi * (200 + 150 * i) * t)).astype(np.float32), RATE)
        rows.append({"id": f"{split}-{i}", "location": f"{path}:1", "audio_path": str(path), "text": "a",
                     "offset_sec": None, "duration_sec": None})  # fmt: skip
    return pl.DataFrame(rows)


def test_an_entry_defaults_to_mfcc_targets_and_needs_known_targets_and_a_source():
    assert check_units_entry("it1", {"source": "data/02_transcripts"}) == "mfcc"
    assert check_units_entry("it2", {"targets": "layer", "source": "data/11_hubert/it1/abx"}) == "layer"
    with pytest.raises(ValueError, match=r"hubert.iterations.it1.units.targets='fbank': one of mfcc, layer"):
        check_units_entry("it1", {"targets": "fbank", "source": "x"})
    with pytest.raises(ValueError, match=r"hubert.iterations.it1.units.source is missing"):
        check_units_entry("it1", {"targets": "mfcc"})


def test_mfcc_units_are_written_per_split_at_the_models_frame_rate(tmp_path):
    manifests = {"train": tone_manifest(tmp_path, "train", 4), "dev": tone_manifest(tmp_path, "dev", 2)}
    output = tmp_path / "it1" / "units"
    (output / "stale").mkdir(parents=True)  # a stage output starts empty
    units = {"source": "transcripts", "clusters": 3, "sample_fraction": 1.0, "seed": 0}
    report = write_units("it1", units, output, manifests)
    assert not (output / "stale").exists()
    assert manifest_ids(output / "manifests" / "train.jsonl") == ["train-0", "train-1", "train-2", "train-3"]
    assert np.load(output / "centroids.npy").shape == (3, 39)  # (K, F): MFCC-39
    table = pq.read_table(output / "dev.parquet").to_pylist()
    assert [row["id"] for row in table] == ["dev-0", "dev-1"]
    # 0.5 s: 50 MFCC frames at 100 Hz, every second kept -> about 25 units at 50 Hz, each a cluster or -1
    assert all(20 <= len(row["labels"]) <= 26 and set(row["labels"]) <= {-1, 0, 1, 2} for row in table)
    assert report["iteration"] == "it1" and report["targets"] == "mfcc"
    assert {split: report["units"][split]["utterances"] for split in ("train", "dev")} == {
        "train": 4,
        "dev": 2,
    }
    assert report["units"]["dev"]["mean_distance"] > 0


def test_a_dev_manifest_naming_no_voices_gets_the_reason_in_the_report(tmp_path):
    manifest = tmp_path / "dev.jsonl"
    manifest.write_text(json.dumps({"id": "a", "audio_path": "a.wav", "text": "hi"}) + "\n")
    write_phone_scores({"iteration": "it1"}, manifest, tmp_path)
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["iteration"] == "it1"
    assert "no utterance could be aligned" in report["phones"]["reason"]
    assert not (tmp_path / "phones").exists()
