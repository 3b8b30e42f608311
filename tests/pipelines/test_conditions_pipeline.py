"""The `conditions` stage: the test split featurized under each evaluation condition."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import yaml

from asr_pipeline.io.datasets import FeatureShardsDataset
from asr_pipeline.pipelines.conditions import create_pipeline
from asr_pipeline.pipelines.features import create_pipeline as features_pipeline
from asr_pipeline.pipelines.splits import CONDITIONS, EVAL_SPLITS
from tests.conftest import PROJECT_ROOT
from tests.pipelines.conftest import feature_shard_datasets, run_stage
from tests.pipelines.test_features_pipeline import _manifest

CLEAN_CONDITIONS = {
    "seed": 1,
    "noisy": {"kind": "noise", "noise": "white", "snr_db": 5},
    "reverb": {"kind": "reverb", "rt60_sec": 0.5},
    "telephone": {"kind": "telephone"},
    "codec": {"kind": "codec", "codec": "opus", "bitrate_kbps": 12},
    "fast": {"kind": "speed", "factor": 1.25},
    "slow": {"kind": "speed", "factor": 0.8},
}


def test_every_condition_split_is_the_test_split_under_its_condition(tmp_path, spm_model, project_params):
    manifest = _manifest(tmp_path, "test", [(1.0, "the cat", None), (0.6, "a dog", None)])
    params = {
        "features": project_params["features"],
        "tokenizer": project_params["tokenizer"],
        "train": project_params["train"],
        "conditions": CLEAN_CONDITIONS,
        "augmentation": None,
    }
    shards = {
        f"test_{name}.feature_shards": FeatureShardsDataset(str(tmp_path / "conditions" / name))
        for name in CONDITIONS
    }
    catalog = run_stage(
        create_pipeline(), {"test.manifest": manifest, "tokenizer_model": spm_model}, shards, params
    )
    clean = run_stage(
        features_pipeline().only_nodes_with_namespaces(["test"]),
        {"test.manifest": manifest, "tokenizer_model": spm_model},
        feature_shard_datasets(tmp_path),
        params,
    )
    [clean_shard] = clean.load("test.feature_shards")
    clean_table = pq.read_table(clean_shard)
    for name in CONDITIONS:
        report = catalog.load(f"test_{name}.extraction_report")
        assert report["kept"] == 2 and report["kept_with"][f"condition {name}"]["count"] == 2
        [shard] = catalog.load(f"test_{name}.feature_shards")
        table = pq.read_table(shard)
        assert table["id"].to_pylist() == clean_table["id"].to_pylist()
        assert table["tokens"].to_pylist() == clean_table["tokens"].to_pylist()
        durations = table["duration_ms"].to_pylist()
        if name == "fast":
            assert durations == [800, 480]
        elif name == "slow":
            assert durations == [1250, 750]
        else:
            assert durations == clean_table["duration_ms"].to_pylist()
            first = np.asarray(table["features"][0].as_py(), dtype=np.float32)
            reference = np.asarray(clean_table["features"][0].as_py(), dtype=np.float32)
            assert not np.allclose(first, reference), f"{name} changed the features"


def test_dvc_yaml_and_params_name_the_same_condition_splits_as_the_pipelines():
    dvc = yaml.safe_load((PROJECT_ROOT / "dvc.yaml").read_text())
    params = yaml.safe_load((PROJECT_ROOT / "params.yaml").read_text())
    assert tuple(dvc["stages"]["evaluate"]["foreach"]) == EVAL_SPLITS
    assert set(params["conditions"]) == {"seed", *CONDITIONS}
    metrics = {next(iter(entry)) for entry in dvc["stages"]["conditions"]["metrics"]}
    assert metrics == {f"${{paths.metrics}}/features_test_{name}.json" for name in CONDITIONS}
