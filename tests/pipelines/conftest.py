"""Run one stage's pipeline on an in-memory catalog."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kedro.io import AbstractDataset, DataCatalog, MemoryDataset
from kedro.pipeline import Pipeline
from kedro.runner import SequentialRunner

from asr_pipeline.io.datasets import FeatureShardsDataset
from asr_pipeline.pipelines.splits import SPLITS


class KeptMemoryDataset(MemoryDataset):
    """A MemoryDataset the runner cannot release, so a test can read every output afterwards."""

    def _release(self) -> None:
        pass


def run_stage(
    pipeline: Pipeline,
    inputs: dict[str, Any],
    datasets: dict[str, AbstractDataset] | None = None,
    params: dict | None = None,
) -> DataCatalog:
    """Feed ``inputs`` (and ``params:`` entries), run, and return the catalog holding every output."""
    catalog = DataCatalog()
    for name, value in inputs.items():
        catalog[name] = MemoryDataset(value, copy_mode="assign")
    for name, value in _flatten_params(params or {}).items():
        catalog[f"params:{name}"] = MemoryDataset(value, copy_mode="assign")
    for name, dataset in (datasets or {}).items():
        catalog[name] = dataset
    for name in pipeline.all_outputs():
        if name not in catalog:
            catalog[name] = KeptMemoryDataset(copy_mode="assign")
    SequentialRunner().run(pipeline, catalog)
    return catalog


def _flatten_params(params: dict, prefix: str = "") -> dict[str, Any]:
    flat = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        flat[name] = value
        if isinstance(value, dict):
            flat.update(_flatten_params(value, prefix=f"{name}."))
    return flat


@pytest.fixture
def project_params() -> dict:
    import yaml

    from tests.conftest import PROJECT_ROOT

    return yaml.safe_load((PROJECT_ROOT / "params.yaml").read_text())


def feature_shard_datasets(root: Path) -> dict[str, FeatureShardsDataset]:
    """The features stage's shard outputs of every split, written under ``root/features/<split>``."""
    return {
        f"{split}.feature_shards": FeatureShardsDataset(str(root / "features" / split)) for split in SPLITS
    }
