"""The `finetune` stage: an entry of params.yaml finetune.runs adapts its base run to a split under a condition
(cut by utterance id into training and validation parts), keeps the base run's model, and scores base and
fine-tuned run on the evaluation shards."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
import yaml

from asr_pipeline.io.datasets import DirectoryDataset
from asr_pipeline.pipelines.features import create_pipeline as features_pipeline
from asr_pipeline.pipelines.finetune import create_pipeline
from asr_pipeline.pipelines.finetune.nodes import validation_part
from asr_pipeline.training.config import resolve_config
from asr_pipeline.training.launch import run_training
from tests.conftest import PROJECT_ROOT
from tests.pipelines.conftest import feature_shard_datasets, run_stage
from tests.pipelines.test_conditions_pipeline import CLEAN_CONDITIONS
from tests.pipelines.test_features_pipeline import _manifest

TEXTS = ["the cat", "a dog", "the cat sat", "a dog ran", "the sun", "a cat ran", "the dog sat", "a sun"]
TRAIN = {
    "launch": {"nproc_per_node": 1},
    "data": {"adaptive_batch_budget": 2000, "adaptive_batch_max_samples": 8},
    "model": {"architecture": "zipformer", "variant": "demo"},  # not the base's: the base run's model wins
    "optim": {"epochs": 1, "learning_rate": 1e-3, "lr_warmup_steps": 1},
    "run": {"seed": 0, "log_every": 1, "dvclive": False, "threads_per_rank": 1},
}


@pytest.fixture(scope="module")
def base(tmp_path_factory, spm_model):
    """Clean dev features and a tiny squeezeformer run trained on them, written to disk."""
    root = tmp_path_factory.mktemp("finetune")
    manifest = _manifest(root, "dev", [(0.6 + 0.05 * i, text, None) for i, text in enumerate(TEXTS)])
    params = yaml.safe_load((PROJECT_ROOT / "params.yaml").read_text())
    catalog = run_stage(
        features_pipeline().only_nodes_with_namespaces(["dev"]),
        {"dev.manifest": manifest, "tokenizer_model": spm_model},
        feature_shard_datasets(root),
        {"features": params["features"], "tokenizer": params["tokenizer"], "train": params["train"]},
    )
    shards = catalog.load("dev.feature_shards")
    (root / "tokenizer.model").write_bytes(spm_model)
    config = {
        "data": {"train_manifests": shards, "val_manifests": shards, "adaptive_batch_budget": 2000},
        "model": {"architecture": "squeezeformer", "variant": "tiny"},
        "optim": {"epochs": 1, "learning_rate": 1e-3, "lr_warmup_steps": 1},
        "run": {
            "output_dir": str(root / "base"),
            "tokenizer": str(root / "tokenizer.model"),
            "dvclive": False,
        },
    }
    run_training(resolve_config(config))
    return root, manifest, params


def test_a_finetune_entry_trains_from_its_base_on_its_corpus_and_scores_before_and_after(base, spm_model):
    root, manifest, params = base
    entry = {
        "base": str(root / "base"),
        "corpus": {"split": "dev", "condition": "noisy", "val_share": 0.3},
        "evaluate": str(root / "features" / "dev"),
        "train": {"finetune": {"method": "lora", "lora_rank": 2}, "optim": {"early_stopping_patience": 1}},
    }
    run_stage(
        create_pipeline(),
        {"dev.manifest": manifest, "test.manifest": manifest, "tokenizer_model": spm_model},
        {"finetune_dir": DirectoryDataset(str(root / "finetuned"))},
        {
            "features": params["features"],
            "tokenizer": params["tokenizer"],
            "conditions": CLEAN_CONDITIONS,
            "train": TRAIN,
            "finetune": {"current": "noisy_lora", "runs": {"noisy_lora": entry}},
        },
    )

    folder = root / "finetuned" / "noisy_lora"
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["method"] == "lora" and metrics["base_model"] == str(root / "base")
    assert 0 < metrics["trainable_params"] < metrics["total_params"]
    for when in ("before", "after"):
        assert metrics[when]["utterances"] == len(TEXTS) and metrics[when]["cer"] >= 0
    assert metrics["after"]["checkpoint"] == "best" and metrics["before"]["checkpoint"] == "latest"
    assert metrics["train_sec"] > 0 and metrics["peak_rss_mb"][0] > 100
    assert metrics["stopped_early"] is False and metrics["epochs_run"] == 1

    ids = {part: [] for part in ("train", "val")}
    for part in ids:
        for shard in sorted((folder / "data" / part).glob("*.parquet")):
            ids[part] += pq.read_table(shard, columns=["id"])["id"].to_pylist()
    assert sorted(ids["train"] + ids["val"]) == sorted(manifest["id"].to_list())
    assert ids["val"] == [i for i in manifest["id"].to_list() if validation_part(i, 0.3)] and ids["val"]

    config = json.loads((folder / "run" / "training_config.json").read_text())
    assert config["model"]["architecture"] == "squeezeformer" and config["model"]["variant"] == "tiny"
    assert config["run"]["init_from"] == str(root / "base")
    assert (folder / "run" / "tokenizer.model").read_bytes() == spm_model, "the base run's tokenizer"


def test_an_entry_without_its_keys_or_with_an_unknown_condition_is_refused(base, spm_model, tmp_path):
    root, manifest, params = base

    def run(entry):
        run_stage(
            create_pipeline(),
            {"dev.manifest": manifest, "test.manifest": manifest, "tokenizer_model": spm_model},
            {"finetune_dir": DirectoryDataset(str(tmp_path))},
            {
                "features": params["features"],
                "tokenizer": params["tokenizer"],
                "conditions": CLEAN_CONDITIONS,
                "train": TRAIN,
                "finetune": {"current": "x", "runs": {"x": entry}},
            },
        )

    with pytest.raises(ValueError, match=r"finetune.runs.x needs 'evaluate'"):
        run({"base": str(root / "base"), "corpus": {}})
    entry = {"base": str(root / "base"), "evaluate": str(root / "features" / "dev")}
    with pytest.raises(
        ValueError, match=r"condition 'storm' is not one of params.yaml conditions: noisy, reverb"
    ):
        run({**entry, "corpus": {"split": "dev", "condition": "storm"}})


def test_dvc_yaml_runs_one_finetune_stage_per_entry_and_params_yaml_defines_none():
    stages = yaml.safe_load((PROJECT_ROOT / "dvc.yaml").read_text())["stages"]
    params = yaml.safe_load((PROJECT_ROOT / "params.yaml").read_text())
    assert stages["finetune"]["foreach"] == "${finetune.runs}" and params["finetune"]["runs"] == {}
    assert "--params=finetune.current=${key}" in stages["finetune"]["do"]["cmd"]
