"""training.finetune_stage: the parts of a finetune@<name> stage that need no training run (the run itself,
its scores and metrics file: tests/pipelines/test_finetune_pipeline.py)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from asr_pipeline.run_layout import CONFIG_FILE, TOKENIZER_FILE
from asr_pipeline.training.config import resolve_config, save_json
from asr_pipeline.training.finetune_stage import (
    corpus_manifests,
    featurize_corpus,
    finetune_config,
    run_finetune_entry,
    validation_part,
)

CONDITIONS = {"seed": 3, "noisy": {"noise": {"snr_db": [10, 20]}}}
SHARED = (b"", {}, {}, None)  # never read: every case here is refused before featurizing


def base_run_config(run_dir: Path) -> Path:
    """A base run dir holding only what finetune_config reads: its training_config.json (tiny squeezeformer)."""
    config = resolve_config(
        {
            "data": {"train_manifests": ["base.parquet"], "input_dim": 16},
            "model": {"architecture": "squeezeformer", "variant": "tiny", "dropout": 0.3},
            "run": {"output_dir": str(run_dir)},
        }
    )
    run_dir.mkdir(parents=True)
    save_json(config, run_dir / CONFIG_FILE)
    return run_dir


def test_the_validation_cut_is_stable_per_id_and_takes_about_its_share():
    ids = [f"utt-{i:04d}" for i in range(2000)]
    first = [validation_part(i, 0.2) for i in ids]
    assert first == [validation_part(i, 0.2) for i in ids]
    assert 0.17 < sum(first) / len(ids) < 0.23
    # a larger share only adds utterances: the hash is compared with the share, so none moves out
    assert all(validation_part(i, 0.5) for i, chosen in zip(ids, first, strict=True) if chosen)


@pytest.mark.parametrize(
    "corpus, message",
    [
        ({"split": "train", "condition": "noisy"}, r"split 'train' is not one of dev, test"),
        (
            {"split": "dev", "condition": "phone"},
            r"condition 'phone' is not one of params.yaml conditions: noisy",
        ),
        ({"split": "dev", "condition": "seed"}, r"condition 'seed' is not one of"),
        ({"split": "dev", "condition": "noisy", "val_share": 1.0}, r"val_share must be in \(0, 1\), got 1.0"),
    ],
)
def test_a_corpus_naming_an_unknown_split_or_condition_or_a_bad_share_is_refused(tmp_path, corpus, message):
    manifests = {"dev": pl.DataFrame({"id": ["a"]}), "test": pl.DataFrame({"id": ["b"]})}
    with pytest.raises(ValueError, match=message):
        featurize_corpus(manifests, corpus, tmp_path, SHARED, CONDITIONS)
    assert not (tmp_path / "train").exists()


def test_named_manifests_are_used_as_given_and_recorded_in_the_data_folder(tmp_path):
    corpus = {"train_manifests": ["a.parquet", "b.parquet"], "val_manifests": ["c.jsonl"]}
    named = corpus_manifests(corpus, tmp_path / "data", {}, SHARED, CONDITIONS)
    assert named == {"train_manifests": ["a.parquet", "b.parquet"], "val_manifests": ["c.jsonl"]}
    assert json.loads((tmp_path / "data" / "manifests.json").read_text()) == named


def test_the_config_keeps_the_base_runs_model_under_the_entrys_overrides(tmp_path):
    base = base_run_config(tmp_path / "base")
    train_params = {
        "launch": {"nproc_per_node": 2},  # a launch option, not a config section
        "model": {"architecture": "zipformer", "variant": "demo"},  # params.yaml's model: the base's wins
        "optim": {"epochs": 3, "learning_rate": 1e-3},
    }
    overrides = {"optim": {"epochs": 1}, "model": {"dropout": 0.0}, "finetune": {"method": "lora"}}
    manifests_of = {"train_manifests": ["t.parquet"], "val_manifests": ["v.parquet"]}
    config = finetune_config(train_params, overrides, base, manifests_of, tmp_path / "run")
    assert (config.model.architecture, config.model.variant, config.model.dropout) == (
        "squeezeformer",
        "tiny",
        0.0,
    )
    assert (config.optim.epochs, config.optim.learning_rate) == (1, 1e-3)
    assert config.finetune.method == "lora"
    assert (config.data.train_manifests, config.data.val_manifests) == (["t.parquet"], ["v.parquet"])
    assert config.data.length_index is None
    assert str(config.run.init_from) == str(base)
    assert str(config.run.tokenizer) == str(tmp_path / "run" / TOKENIZER_FILE)


def test_a_safetensors_base_keeps_params_yaml_model(tmp_path):
    weights = tmp_path / "base.safetensors"
    train_params = {"model": {"architecture": "squeezeformer", "variant": "tiny"}}
    config = finetune_config(train_params, {}, weights, {"train_manifests": ["t.parquet"]}, tmp_path / "run")
    assert (config.model.architecture, config.model.variant) == ("squeezeformer", "tiny")
    assert str(config.run.init_from) == str(weights)


@pytest.mark.parametrize("missing", ["base", "corpus", "evaluate"])
def test_an_entry_without_one_of_its_keys_is_refused_before_its_folder_is_touched(tmp_path, missing):
    entry = {"base": "b.safetensors", "corpus": {}, "evaluate": str(tmp_path)}
    del entry[missing]
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "kept").write_text("")
    with pytest.raises(ValueError, match=rf"finetune.runs.noisy needs '{missing}'"):
        run_finetune_entry("noisy", entry, tmp_path / "root", {}, SHARED, CONDITIONS, {})
    assert (tmp_path / "root" / "kept").exists()


def test_an_evaluate_folder_without_shards_is_refused(tmp_path):
    entry = {"base": "b.safetensors", "corpus": {}, "evaluate": str(tmp_path)}
    with pytest.raises(ValueError, match=r"finetune.runs.noisy.evaluate=.* holds no feature shards"):
        run_finetune_entry("noisy", entry, tmp_path / "root", {}, SHARED, CONDITIONS, {})
