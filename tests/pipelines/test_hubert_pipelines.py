"""HuBERT's Kedro pipelines on a tiny audio corpus: hubert_units writes the iteration's manifests, MFCC shards,
centroids and 50 Hz units of train and dev; hubert_pretrain pretrains hubert-pretrain on them through torchrun."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest
import soundfile as sf
import torch

from asr_pipeline.demo.synthesis import Voice, synthesize
from asr_pipeline.hubert.iterations import hubert_iteration
from asr_pipeline.io.datasets import DirectoryDataset, Manifest
from asr_pipeline.models.hubert import conv_output_lengths, hubert_config
from asr_pipeline.models.registry import build_model
from asr_pipeline.pipelines.hubert_abx import create_pipeline as abx_pipeline
from asr_pipeline.pipelines.hubert_abx.nodes import score_layers
from asr_pipeline.pipelines.hubert_pretrain import create_pipeline as pretrain_pipeline
from asr_pipeline.pipelines.hubert_units import create_pipeline as units_pipeline
from asr_pipeline.pipelines.hubert_units.nodes import make_units, phone_alignments
from asr_pipeline.pipelines.hubert_validate import create_pipeline as validate_pipeline
from asr_pipeline.pipelines.hubert_validate.nodes import validate_checkpoints
from asr_pipeline.run_layout import kept_checkpoints
from asr_pipeline.training.resume import init_from_weights
from tests.factories import char_tokenizer_model, random_sentences
from tests.pipelines.conftest import run_stage
from tests.training.conftest import events

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


# Words that differ in their middle phone within one context (k_t): ABX cells within and across speakers.
MINIMAL_PAIRS = [
    "the cat saw a kit near the cot",
    "a kit and a cot and a cat",
    "put the cat by the kit in the cot",
]


def voiced_manifest(root, count: int, seed: int) -> tuple[pl.DataFrame, Path]:
    """``count`` espeak-ng utterances as the demo corpus lays out dev: a JSONL naming each voice, and the
    transcripts-stage manifest of it."""
    rng = np.random.default_rng(seed)
    (root / "dev").mkdir()
    rows, raw = [], []
    for i, text in enumerate(MINIMAL_PAIRS * (count // len(MINIMAL_PAIRS))):
        voice = Voice("en-us", ["m3", "f2"][i % 2], int(rng.integers(140, 220)), int(rng.integers(20, 80)))
        path = root / "dev" / f"dev-{i:03d}.wav"
        path.write_bytes(synthesize(text, voice))
        raw.append({"id": f"dev-{i:03d}", "audio_path": f"dev/{path.name}", "text": text,
                    "speaker": voice.espeak_name, "rate_wpm": voice.rate_wpm, "pitch": voice.pitch})  # fmt: skip
        rows.append({"id": f"dev-{i:03d}", "location": f"{root}/dev.jsonl:{i + 1}", "audio_path": str(path),
                     "text": text, "offset_sec": None, "duration_sec": None})  # fmt: skip
    (root / "dev.jsonl").write_text("".join(json.dumps(row) + "\n" for row in raw))
    return pl.DataFrame(rows), root / "dev.jsonl"


def hubert_params(**iteration) -> dict:
    return {
        "jobs": 1,
        "current": "it1",
        "train": {
            "model": {"architecture": "hubert-pretrain", "variant": "tiny", "dropout": 0.0},
            "optim": {"epochs": 2, "learning_rate": 1e-3},
            "data": {"adaptive_batch_budget": 400, "adaptive_batch_max_samples": 4},
            "run": {"backend": "cpu", "dvclive": False, "log_every": 1, "keep_checkpoints": True},
        },
        "launch": {"nproc_per_node": 1},
        "iterations": {
            "it1": {
                "units": {"targets": "mfcc", "source": "transcripts", "clusters": 4, "sample_fraction": 0.5},
                "train": {},
            }
        }
        | iteration,
    }


@pytest.fixture(scope="module")
def units_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("hubert")
    dev, dev_jsonl = voiced_manifest(root, 6, 2)
    inputs = {
        "train.manifest": audio_manifest(root, "train", 6, 1),
        "dev.manifest": dev,
        "dev.raw_manifest": Manifest(dev_jsonl),
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
    for split in ("train.manifest", "dev.manifest"):
        manifest, name = inputs[split], split.split(".")[0]
        table = pq.read_table(units / f"{name}.parquet").to_pylist()
        assert [row["id"] for row in table] == manifest["id"].to_list()
        for row, path in zip(table, manifest["audio_path"], strict=True):
            info = sf.info(path)  # espeak's dev audio is 22.05 kHz: resampled to 16 kHz first
            samples = -(-round(info.frames * RATE / info.samplerate) // 320) * 320  # the frontend pads to 320
            model_frames = int(conv_output_lengths(config, torch.tensor([samples]))[0])
            assert abs(row["frames"] - model_frames) <= 1  # MFCC at 100 Hz, every second frame kept
            assert set(row["labels"]) <= set(range(4))
        lines = (units / "manifests" / f"{name}.jsonl").read_text().splitlines()
        assert [json.loads(line)["id"] for line in lines] == manifest["id"].to_list()


def test_the_units_stage_aligns_the_voiced_dev_split_and_scores_its_units_against_the_phones(units_run):
    hubert_dir, inputs = units_run
    units = hubert_dir / "it1" / "units"
    phones = json.loads((units / "report.json").read_text())["phones"]
    assert phones["utterances"] == phones["kept"] == 6 and phones["skipped"] == 0
    assert 0 <= phones["pnmi"] <= 1 and 0 < phones["phone_purity"] <= 1 and phones["frames"] > 50
    lines = (units / "phones" / "dev.item").read_text().splitlines()
    assert lines[0] == "#file onset offset #phone prev-phone next-phone speaker"
    assert len(lines) - 1 == phones["items"] and phones["phones"] - 10 < phones["items"] <= phones["phones"]
    assert {line.split()[0] for line in lines[1:]} == set(inputs["dev.manifest"]["id"])
    inventory = json.loads((units / "phones" / "inventory.json").read_text())
    assert {line.split()[3] for line in lines[1:]} <= set(inventory) and len(inventory) == phones["inventory"]
    assert {line.split()[6] for line in lines[1:]} == {"en-us+m3", "en-us+f2"}


def test_a_dev_manifest_without_voices_gets_the_reason_not_phones(units_run, tmp_path):
    hubert_dir, _ = units_run
    plain = tmp_path / "dev.tsv"
    plain.write_text("audio_path\ttext\n")
    report = {"iteration": "it1"}
    phone_alignments(report, Manifest(plain), hubert_dir, hubert_params())
    assert "names no espeak-ng voices" in report["phones"]["reason"] and report["phones"]["kept"] == 0


@pytest.fixture(scope="module")
def pretrained(units_run):
    hubert_dir, _ = units_run
    run_stage(
        pretrain_pipeline(),
        {"tokenizer_model": char_tokenizer_model()},
        {"hubert_dir": DirectoryDataset(str(hubert_dir))},
        {"hubert": hubert_params()},
    )
    return hubert_dir


def test_the_pretraining_stage_trains_on_the_units_and_keeps_every_checkpoint(pretrained):
    run = pretrained / "it1" / "run"
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["val_loss"] > 0 and 0 <= metrics["val_accuracy"] <= 100
    saved = json.loads((run / "training_config.json").read_text())
    assert (
        saved["model"]["architecture"] == "hubert-pretrain" and saved["model"]["options"]["num_classes"] == 4
    )
    assert saved["data"]["alignment"].endswith("it1/units/train.parquet")
    kept = [e["values"]["kept_path"] for e in events(run, "checkpoint")]
    assert len(kept) == 2 and [Path(path).name for path in kept] == [p.name for p in kept_checkpoints(run)]


@pytest.fixture(scope="module")
def validated(pretrained):
    run_stage(
        validate_pipeline(),
        {},
        {"hubert_dir": DirectoryDataset(str(pretrained))},
        {"hubert": hubert_params()},
    )
    return pretrained


def test_the_validation_stage_scores_every_kept_checkpoint_and_points_at_the_best(validated):
    pretrained = validated
    iteration = pretrained / "it1"
    rows = list(csv.DictReader((iteration / "validation" / "checkpoints.tsv").open(), delimiter="\t"))
    steps = [int(e["step"]) for e in events(iteration / "run", "checkpoint")]
    assert [int(row["step"]) for row in rows] == steps and [row["epoch"] for row in rows] == ["0", "1"]
    # The last kept checkpoint is the run's final model, scored on the same dev set with the same masks.
    final = json.loads((iteration / "run" / "metrics.json").read_text())
    assert float(rows[-1]["val_loss"]) == pytest.approx(final["val_loss"], rel=1e-4)
    assert float(rows[-1]["val_accuracy"]) == pytest.approx(final["val_accuracy"], abs=1e-3)
    best = json.loads((iteration / "validation" / "best.json").read_text())
    lowest = min(rows, key=lambda row: float(row["val_loss"]))
    assert best["step"] == int(lowest["step"]) and best["checkpoint"] == lowest["checkpoint"]
    assert (iteration / best["checkpoint"]).is_file(), "the pointer names a file, relative to the iteration"
    weights = iteration / best["weights"]
    assert weights.read_bytes() == (iteration / best["checkpoint"]).read_bytes()
    # Fine-tuning starts there: a hubert CTC model takes the whole encoder and leaves out the unit head.
    report = init_from_weights(
        build_model("hubert", "tiny", input_dim=320, vocab_size=7), weights, verbose=False
    )
    assert set(report["skipped"]) == {"final_proj.weight", "final_proj.bias", "label_embeddings"}
    assert report["loaded"] > 0 and report["not_in_source"] == ["ctc_head.bias", "ctc_head.weight"]
    metrics = json.loads((iteration / "validation_metrics.json").read_text())
    assert metrics["checkpoints"] == 2 and metrics["best"]["val_loss"] == best["val_loss"]


@pytest.fixture(scope="module")
def scored(validated):
    pytest.importorskip(
        "fastabx", reason="fastabx needs Python >= 3.12 (.ci/setup.sh makes the venv with it)"
    )
    run_stage(
        abx_pipeline(), {}, {"hubert_dir": DirectoryDataset(str(validated))}, {"hubert": hubert_params()}
    )
    return validated


def test_the_abx_stage_scores_mfcc_and_every_layer_of_the_best_checkpoint(scored):
    iteration = scored / "it1"
    rows = list(csv.DictReader((iteration / "abx" / "scores.tsv").open(), delimiter="\t"))
    layers = hubert_config("tiny").num_layers
    assert [row["features"] for row in rows] == ["mfcc", *(f"layer_{n}" for n in range(1, layers + 1))]
    assert [row["frequency"] for row in rows] == ["100"] + ["50"] * layers
    assert all(0 <= float(row[mode]) <= 100 for row in rows for mode in ("within", "across"))
    best = json.loads((iteration / "abx" / "best_layer.json").read_text())
    lowest = min(rows[1:], key=lambda row: float(row["within"]) + float(row["across"]))
    assert best["within"] + best["across"] == pytest.approx(
        float(lowest["within"]) + float(lowest["across"]), abs=2e-3
    )
    chosen = json.loads((iteration / "validation" / "best.json").read_text())
    assert best["checkpoint"] == chosen["checkpoint"]
    metrics = json.loads((iteration / "abx_metrics.json").read_text())
    assert set(metrics) == {"mfcc", "best_layer"} and metrics["best_layer"]["layer"] == best["layer"]


def test_iteration_2_clusters_the_best_abx_layer_of_iteration_1_at_the_models_frame_rate(scored, units_run):
    _, inputs = units_run
    source = scored / "it1" / "abx"
    it2 = {
        "units": {"targets": "layer", "source": str(source), "clusters": 3, "sample_fraction": 1.0},
        "train": {},
    }
    params = hubert_params(it2=it2) | {"current": "it2"}
    run_stage(units_pipeline(), inputs, {"hubert_dir": DirectoryDataset(str(scored))}, {"hubert": params})

    units = scored / "it2" / "units"
    best = json.loads((source / "best_layer.json").read_text())
    report = json.loads((units / "report.json").read_text())
    assert report["targets"] == "layer" and report["extraction"]["train"]["layer"] == best["layer"]
    assert np.load(units / "centroids.npy").shape == (3, hubert_config("tiny").d_model)
    first = {
        row["id"]: row["frames"]
        for row in pq.read_table(scored / "it1" / "units" / "dev.parquet").to_pylist()
    }
    second = pq.read_table(units / "dev.parquet").to_pylist()
    assert [row["id"] for row in second] == inputs["dev.manifest"]["id"].to_list()
    for row in second:  # one unit per model frame (50 Hz), as many as iteration 1's units (±1: MFCC rounding)
        assert abs(row["frames"] - first[row["id"]]) <= 1 and set(row["labels"]) <= {0, 1, 2}
    assert "pnmi" in report["phones"], "the new units are scored against the phones too"


def test_an_iteration_without_a_source_is_refused(units_run, tmp_path):
    _, inputs = units_run
    params = hubert_params(it1={"units": {"targets": "mfcc"}, "train": {}})
    with pytest.raises(ValueError, match=r"hubert\.iterations\.it1\.units\.source is missing"):
        make_units(inputs["train.manifest"], inputs["dev.manifest"], tmp_path, params)


def test_abx_without_an_item_file_says_why(tmp_path):
    score_layers(tmp_path, hubert_params())
    assert (
        "names no espeak-ng voices"
        in json.loads((tmp_path / "it1" / "abx_metrics.json").read_text())["reason"]
    )


def test_validating_a_run_that_kept_no_checkpoints_says_how_to_keep_them(tmp_path):
    (tmp_path / "it1" / "run").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match=r"holds no checkpoints.*keep_checkpoints: true"):
        validate_checkpoints(tmp_path, hubert_params())


def test_an_iteration_without_its_two_entries_is_refused():
    params = hubert_params(it1={"units": {"targets": "mfcc"}})
    with pytest.raises(ValueError, match=r"hubert\.iterations\.it1 needs train"):
        hubert_iteration(params)
