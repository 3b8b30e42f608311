"""hubert.pretraining: an iteration's pretraining config reads the units folder (manifests, units as the
alignment, the cluster count as the unit head's classes) under hubert.train and the iteration's overrides (the
run itself: tests/pipelines/test_hubert_pipelines.py)."""

from __future__ import annotations

import numpy as np

from asr_pipeline.hubert.pretraining import pretrain_config
from asr_pipeline.training.config import resolve_config


def test_the_config_trains_on_the_units_folder_with_one_class_per_cluster(tmp_path):
    (tmp_path / "units").mkdir()
    np.save(tmp_path / "units" / "centroids.npy", np.zeros((7, 39), dtype=np.float32))  # (K, F)
    train = {"model": {"variant": "tiny", "options": {"final_dim": 8}}, "optim": {"epochs": 5}}
    overrides = {"optim": {"epochs": 2}}
    values = pretrain_config(tmp_path, tmp_path / "run" / "tokenizer.model", train, overrides)
    units = tmp_path / "units"
    assert values["data"] == {
        "train_manifests": [str(units / "manifests" / "train.jsonl")],
        "val_manifests": [str(units / "manifests" / "dev.jsonl")],
        "alignment": str(units / "train.parquet"),
        "val_alignment": str(units / "dev.parquet"),
    }
    assert values["model"] == {
        "architecture": "hubert-pretrain", "variant": "tiny", "options": {"final_dim": 8, "num_classes": 7}
    }  # fmt: skip
    assert values["optim"] == {"epochs": 2}
    assert values["run"]["output_dir"] == str(tmp_path / "run")
    config = resolve_config(values)
    assert config.model.options["num_classes"] == 7 and config.optim.epochs == 2
