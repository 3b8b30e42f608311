"""HuBERT's Kedro pipelines on a tiny audio corpus: hubert_units writes the iteration's manifests, MFCC shards,
centroids and 50 Hz units of train and dev; hubert_pretrain pretrains hubert-pretrain on them through torchrun."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest
import soundfile as sf
import torch

from asr_pipeline.io.datasets import DirectoryDataset
from asr_pipeline.models.hubert import conv_output_lengths, hubert_config
from asr_pipeline.pipelines.hubert_pretrain import create_pipeline as pretrain_pipeline
from asr_pipeline.pipelines.hubert_units import create_pipeline as units_pipeline
from asr_pipeline.pipelines.hubert_units.nodes import hubert_iteration
from tests.factories import char_tokenizer_model, random_sentences
from tests.pipelines.conftest import run_stage

RATE = 16000


def audio_manifest(root, split: str, count: int, seed: int) -> pl.DataFrame:
    """``count`` WAV files of 1-1.6 s (tones of a few pitches in noise) and a transcripts-stage manifest."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, text in enumerate(random_sentences(count, seed)):
        samples = int(rng.integers(16000, 25600))
        pitch = rng.choice([200.0, 450.0, 900.0], size=samples // 1600 + 1).repeat(1600)[:samples]
        waveform = 0.3 * np.sin(2 * np.pi * np.cumsum(pitch) / RATE) + 0.01 * rng.standard_normal(samples)
        path = root / f"{split}-{i:03d}.wav"
        sf.write(path, waveform.astype(np.float32), RATE)
        rows.append({"id": f"{split}-{i:03d}", "location": f"{path}:1", "audio_path": str(path), "text": text,
                     "offset_sec": None, "duration_sec": None})  # fmt: skip
    return pl.DataFrame(rows)


def hubert_params(**iteration) -> dict:
    return {
        "jobs": 1,
        "current": "it1",
        "train": {
            "model": {"architecture": "hubert-pretrain", "variant": "tiny", "dropout": 0.0},
            "optim": {"epochs": 1, "learning_rate": 1e-3},
            "data": {"adaptive_batch_budget": 400, "adaptive_batch_max_samples": 4},
            "run": {"backend": "cpu", "dvclive": False, "log_every": 1},
        },
        "launch": {"nproc_per_node": 1},
        "iterations": {
            "it1": {"units": {"targets": "mfcc", "clusters": 4, "sample_fraction": 0.5}, "train": {}}
        }
        | iteration,
    }


@pytest.fixture(scope="module")
def units_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("hubert")
    inputs = {
        "train.manifest": audio_manifest(root, "train", 6, 1),
        "dev.manifest": audio_manifest(root, "dev", 3, 2),
    }
    hubert_dir = root / "hubert"
    run_stage(
        units_pipeline(),
        inputs,
        {"hubert_dir": DirectoryDataset(str(hubert_dir))},
        {"hubert": hubert_params()},
    )
    return hubert_dir, inputs


def test_the_units_stage_writes_manifests_features_centroids_and_50_hz_units(units_run):
    hubert_dir, inputs = units_run
    units = hubert_dir / "it1" / "units"
    assert np.load(units / "centroids.npy").shape == (4, 39)
    report = json.loads((units / "report.json").read_text())
    assert report["kmeans"]["sampled_utterances"] == 3 and report["extraction"]["train"]["kept"] == 6
    config = hubert_config("tiny")
    for split, manifest in inputs.items():
        name = split.split(".")[0]
        table = pq.read_table(units / f"{name}.parquet").to_pylist()
        assert [row["id"] for row in table] == manifest["id"].to_list()
        for row, path in zip(table, manifest["audio_path"], strict=True):
            samples = -(-sf.info(path).frames // 320) * 320  # the waveform frontend's padded length
            model_frames = int(conv_output_lengths(config, torch.tensor([samples]))[0])
            assert abs(row["frames"] - model_frames) <= 1  # MFCC at 100 Hz, every second frame kept
            assert set(row["labels"]) <= set(range(4))
        lines = (units / "manifests" / f"{name}.jsonl").read_text().splitlines()
        assert [json.loads(line)["id"] for line in lines] == manifest["id"].to_list()


def test_the_pretraining_stage_trains_on_the_units(units_run):
    hubert_dir, _ = units_run
    run_stage(
        pretrain_pipeline(),
        {"tokenizer_model": char_tokenizer_model()},
        {"hubert_dir": DirectoryDataset(str(hubert_dir))},
        {"hubert": hubert_params()},
    )
    run = hubert_dir / "it1" / "run"
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["val_loss"] > 0 and 0 <= metrics["val_accuracy"] <= 100
    saved = json.loads((run / "training_config.json").read_text())
    assert (
        saved["model"]["architecture"] == "hubert-pretrain" and saved["model"]["options"]["num_classes"] == 4
    )
    assert saved["data"]["alignment"].endswith("it1/units/train.parquet")


def test_an_iteration_without_its_two_entries_is_refused():
    params = hubert_params(it1={"units": {"targets": "mfcc"}})
    with pytest.raises(ValueError, match=r"hubert\.iterations\.it1 needs train"):
        hubert_iteration(params)
