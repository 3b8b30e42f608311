"""training.loaders: build_data turns the config's manifests into a training loader that yields every kept
example once per epoch and a validation loader in manifest order, keeps to max_train_samples, and refuses what
cannot train (no manifests, waveform options on feature shards, every example skipped) saying what to fix."""

from __future__ import annotations

import pytest
import torch

from asr_pipeline.training.config import resolve_config
from asr_pipeline.training.distributed import DistributedContext
from asr_pipeline.training.loaders import (
    SKIPPED_SHOWN,
    build_data,
    check_waveform_augmentation,
    nothing_trained_error,
)

from .conftest import tiny_config

ONE_RANK = DistributedContext(rank=0, local_rank=0, world_size=1, device=torch.device("cpu"))


def ids_of(loader) -> list[str]:
    return [utterance for batch in loader for utterance in batch.ids]


def test_every_training_example_comes_once_per_epoch_and_validation_in_order(
    corpus, tokenizer_path, tmp_path
):
    config = resolve_config(tiny_config(corpus, tokenizer_path, tmp_path))
    bundle = build_data(config, ONE_RANK)
    first = ids_of(bundle.train_loader)
    assert sorted(first) == sorted([f"tr0-{i:03d}" for i in range(9)] + [f"tr1-{i:03d}" for i in range(7)])
    assert ids_of(bundle.val_loader) == ids_of(bundle.val_loader)  # unshuffled: the same every validation
    assert len(ids_of(bundle.val_loader)) == 5
    assert bundle.train_selection.kept == 16 and bundle.train_audio_hours > 0


def test_max_train_samples_keeps_that_many_examples(corpus, tokenizer_path, tmp_path):
    config = tiny_config(corpus, tokenizer_path, tmp_path)
    config["data"]["max_train_samples"] = 5
    bundle = build_data(resolve_config(config), ONE_RANK)
    assert len(ids_of(bundle.train_loader)) == 5 and bundle.train_selection.kept == 5


def test_no_training_manifests_is_refused(corpus, tokenizer_path, tmp_path):
    config = tiny_config(corpus, tokenizer_path, tmp_path)
    config["data"]["train_manifests"] = []
    with pytest.raises(ValueError, match=r"data\.train_manifests is empty"):
        build_data(resolve_config(config), ONE_RANK)


def test_waveform_augmentation_on_feature_shards_says_to_train_on_raw_manifests(
    corpus, tokenizer_path, tmp_path
):
    config = tiny_config(corpus, tokenizer_path, tmp_path)
    config["data"]["waveform_noise_std"] = 0.01
    data = resolve_config(config).data
    with pytest.raises(ValueError, match=r"needs raw audio manifests.*Train on the raw manifests"):
        check_waveform_augmentation("shards", data)
    check_waveform_augmentation("raw", data)  # raw audio: applied while loading


def test_a_run_whose_examples_were_all_skipped_names_the_first_few():
    skipped = [f"m.jsonl:{line}: undecodable audio" for line in range(1, 9)]
    message = str(nothing_trained_error(skipped, 8, "epoch 1"))
    assert message.startswith("training: all 8 examples of epoch 1 were skipped")
    assert f"m.jsonl:{SKIPPED_SHOWN}:" in message and f"m.jsonl:{SKIPPED_SHOWN + 1}:" not in message
