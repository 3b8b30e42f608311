import json
import shutil

import pytest

from asr_pipeline.io.datasets import ManifestDataset
from asr_pipeline.io.report import SkipReport
from asr_pipeline.pipelines.demo_corpus import create_pipeline
from tests.pipelines.conftest import run_stage

pytestmark = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="needs espeak-ng (make setup)")


def test_demo_corpus_stage_writes_an_audio_folder_and_two_jsonl_manifests(tmp_path):
    datasets = {
        "train.raw_manifest": ManifestDataset(str(tmp_path / "train")),
        "dev.raw_manifest": ManifestDataset(str(tmp_path / "dev.jsonl")),
        "test.raw_manifest": ManifestDataset(str(tmp_path / "test.jsonl")),
    }
    params = {
        "demo_corpus": {"train_size": 3, "dev_size": 2, "test_size": 1, "seed": 7, "max_duration_sec": 6.0}
    }
    run_stage(create_pipeline(), {}, datasets=datasets, params=params)
    assert sorted(p.name for p in (tmp_path / "train").iterdir()) == [
        f"train-00000{i}.{ext}" for i in (1, 2, 3) for ext in ("txt", "wav")
    ]
    dev = [json.loads(line) for line in (tmp_path / "dev.jsonl").read_text().splitlines()]
    assert [row["audio_path"] for row in dev] == ["dev/dev-000001.wav", "dev/dev-000002.wav"]
    records = list(datasets["test.raw_manifest"].load().records(SkipReport()))
    assert len(records) == 1 and records[0].text
