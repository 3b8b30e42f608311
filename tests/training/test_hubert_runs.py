"""HuBERT through the training engine: pretraining on frame units (``data.alignment``) validates its unit
prediction and keeps the best checkpoint by validation loss, a two-rank torchrun job keeps the ranks in sync,
and a CTC run initialised from the pretraining run fine-tunes its encoder on text."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from asr_pipeline.io.shards import records_to_table, write_shard
from asr_pipeline.models.hubert import conv_output_lengths, hubert_config
from asr_pipeline.models.loading import load_run_model
from asr_pipeline.text.tokenizer import CTCTokenizer
from asr_pipeline.training.alignment import ALIGNMENT_SCHEMA
from asr_pipeline.training.config import resolve_config, save_json
from asr_pipeline.training.launch import check_config, launch_training
from asr_pipeline.training.loaders import build_data
from asr_pipeline.training.worker import setup_distributed
from tests.factories import random_sentences

from .conftest import events, run_in_process

UNITS = 6


def write_waveform_shard(path, tokenizer, count, seed, prefix):
    """``count`` utterances of 40..70 waveform frames (0.8..1.4 s of 320-sample rows) and their units: a unit
    per output frame that follows the frame's loudness, so there is something to learn."""
    rng = np.random.default_rng(seed)
    records, units = [], []
    config = hubert_config("tiny")
    for i, text in enumerate(random_sentences(count, seed)):
        frames = int(rng.integers(40, 71))
        loudness = rng.integers(0, UNITS, size=frames)
        waveform = rng.standard_normal((frames, 320)) * (0.1 + loudness[:, None])
        utterance = f"{prefix}-{i:03d}"
        records.append({"id": utterance, "features": waveform.astype(np.float32),
                        "tokens": tokenizer.encode(text), "duration_ms": 20 * frames, "text": text})  # fmt: skip
        out_frames = int(conv_output_lengths(config, torch.tensor([frames * 320]))[0])
        units.append(
            {"id": utterance, "frames": out_frames, "labels": loudness[:out_frames].tolist(), "score": 0.0}
        )
    write_shard(records_to_table(records), path)
    return units


@pytest.fixture(scope="module")
def waveform_corpus(tmp_path_factory, tokenizer_path) -> dict:
    tokenizer = CTCTokenizer.from_file(tokenizer_path)
    root = tmp_path_factory.mktemp("waveform_shards")
    train_units = write_waveform_shard(root / "train-00000.parquet", tokenizer, 10, 1, "tr0")
    train_units += write_waveform_shard(root / "train-00001.parquet", tokenizer, 6, 2, "tr1")
    val_units = write_waveform_shard(root / "val-00000.parquet", tokenizer, 4, 3, "va")
    for name, rows in (("train_units", train_units), ("val_units", val_units)):
        pq.write_table(pa.Table.from_pylist(rows, schema=ALIGNMENT_SCHEMA), root / f"{name}.parquet")
    return {
        "train": [str(root / "train-00000.parquet"), str(root / "train-00001.parquet")],
        "val": [str(root / "val-00000.parquet")],
        "train_units": str(root / "train_units.parquet"),
        "val_units": str(root / "val_units.parquet"),
    }


def hubert_config_dict(corpus, tokenizer_path, run_dir, architecture="hubert-pretrain", **run) -> dict:
    data = {"train_manifests": corpus["train"], "val_manifests": corpus["val"], "adaptive_batch_budget": 300,
            "adaptive_batch_max_samples": 8}  # fmt: skip
    if architecture == "hubert-pretrain":
        data |= {"alignment": corpus["train_units"], "val_alignment": corpus["val_units"]}
    model = {"architecture": architecture, "variant": "tiny", "dropout": 0.0,
             "options": {"num_classes": UNITS, "attention_dropout": 0.0}}  # fmt: skip
    return {
        "data": data,
        "model": model,
        "optim": {"epochs": 2, "learning_rate": 2e-3, "lr_warmup_epochs": 0, "lr_hold_epochs": 0},
        "run": {
            "output_dir": str(run_dir),
            "tokenizer": str(tokenizer_path),
            "backend": "cpu",
            "seed": 3,
            "log_every": 1,
            "dvclive": False,
            **run,
        },
    }


@pytest.mark.usefixtures("single_process")
def test_pretraining_predicts_units_and_keeps_the_best_checkpoint_by_validation_loss(
    waveform_corpus, tokenizer_path, tmp_path
):
    metrics = run_in_process(hubert_config_dict(waveform_corpus, tokenizer_path, tmp_path))

    validations = [e["values"] for e in events(tmp_path, "validation")]
    assert len(validations) == 2 and all("val_cer" not in v for v in validations)
    assert all(v["utterances"] == 4 and 0 <= v["val_accuracy"] <= 100 for v in validations)
    assert validations[1]["val_loss"] < validations[0]["val_loss"]
    train = events(tmp_path, "train")
    assert all(np.isfinite(e["values"]["loss"]) for e in train)
    assert {"loss_masked", "loss_unmasked", "loss_feature_penalty"} <= set(train[-1]["values"])
    assert set(metrics) >= {"train_loss", "val_loss", "val_accuracy"} and "val_cer" not in metrics
    best = min(validations, key=lambda v: v["val_loss"])
    pointer = json.loads((tmp_path / "checkpoint_best.json").read_text())
    assert pointer["metrics"]["val_loss"] == best["val_loss"]
    assert load_run_model(tmp_path).output == "hubert"


@pytest.mark.usefixtures("single_process")
def test_pretraining_without_units_says_what_to_set(waveform_corpus, tokenizer_path, tmp_path):
    config = hubert_config_dict(waveform_corpus, tokenizer_path, tmp_path)
    del config["data"]["alignment"]
    with pytest.raises(ValueError, match=r"predicts frame units.*data\.alignment"):
        run_in_process(config)


@pytest.mark.slow  # a two-rank torchrun job (~25 s here): in `make test-all`; tests/training/test_ddp_training.py keeps DDP in `make test`
@pytest.mark.usefixtures("keep_torch_threads")
def test_a_two_rank_pretraining_job_keeps_the_ranks_in_sync(waveform_corpus, tokenizer_path, tmp_path):
    config_path = tmp_path / "training_config.json"
    config = hubert_config_dict(waveform_corpus, tokenizer_path, tmp_path / "run")
    config["optim"]["epochs"] = 1
    save_json(resolve_config(config), config_path)

    launch_training(config_path, nproc_per_node=2)

    digests = events(tmp_path / "run", "summary")[0]["values"]["parameter_digests"]
    assert len(digests) == 2 and digests[0] == digests[1]


@pytest.mark.usefixtures("single_process")
def test_a_ctc_run_initialised_from_pretraining_fine_tunes_the_encoder(
    waveform_corpus, tokenizer_path, tmp_path
):
    pretrained = tmp_path / "pretrained"
    config = hubert_config_dict(waveform_corpus, tokenizer_path, pretrained)
    config["optim"]["epochs"] = 1
    run_in_process(config)

    finetuned = tmp_path / "finetuned"
    config = hubert_config_dict(
        waveform_corpus, tokenizer_path, finetuned, "hubert", init_from=str(pretrained)
    )
    metrics = run_in_process(config)

    report = events(finetuned, "init_from")[0]["values"]
    assert set(report["skipped"]) == {"final_proj.weight", "final_proj.bias", "label_embeddings"}
    assert report["not_in_source"] == ["ctc_head.bias", "ctc_head.weight"]
    assert report["loaded"] == len(load_run_model(pretrained).model.hubert.state_dict())
    assert metrics["val_cer"] is not None and "val_accuracy" not in metrics


def test_a_hubert_run_gets_no_spec_augment(waveform_corpus, tokenizer_path, tmp_path):
    config = resolve_config(hubert_config_dict(waveform_corpus, tokenizer_path, tmp_path, "hubert"))
    assert config.data.spec_freq_masks > 0  # the defaults ask for it ...
    dataset = build_data(config, setup_distributed(config)).train_loader.dataset
    assert dataset.transform is None  # ... but the model masks its own waveform frames


def test_the_launch_check_accepts_units_and_names_a_missing_file(waveform_corpus, tokenizer_path, tmp_path):
    config = hubert_config_dict(waveform_corpus, tokenizer_path, tmp_path)
    check_config(resolve_config(config))  # hubert-pretrain trains on data.alignment units
    config["data"]["val_alignment"] = str(tmp_path / "missing.parquet")
    with pytest.raises(FileNotFoundError, match=r"data\.val_alignment .*missing\.parquet.*no such file"):
        check_config(resolve_config(config))
