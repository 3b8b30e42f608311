import json
import shutil

import pytest

from asr_pipeline.demo.corpus import open_sentences
from asr_pipeline.io.datasets import DemoCorpusDataset, ManifestDataset
from asr_pipeline.io.report import SkipReport
from asr_pipeline.pipelines.demo_corpus import create_pipeline
from tests.pipelines.conftest import run_stage

needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="needs espeak-ng (make setup)")
PARAMS = {
    "demo_corpus": {
        "train_size": 3, "dev_size": 2, "test_size": 1, "test_open_size": 1, "seed": 7, "max_duration_sec": 6.0
    }
}  # fmt: skip


@needs_espeak
def test_demo_corpus_stage_writes_an_audio_folder_and_two_jsonl_manifests_in_its_own_folder(tmp_path):
    demo = tmp_path / "demo"
    run_stage(
        create_pipeline(), {}, datasets={"demo_corpus_files": DemoCorpusDataset(str(demo))}, params=PARAMS
    )

    assert sorted(p.name for p in (demo / "train").iterdir()) == [
        f"train-00000{i}.{ext}" for i in (1, 2, 3) for ext in ("txt", "wav")
    ]
    dev = [json.loads(line) for line in (demo / "dev.jsonl").read_text().splitlines()]
    assert [row["audio_path"] for row in dev] == ["dev/dev-000001.wav", "dev/dev-000002.wav"]
    records = list(ManifestDataset(str(demo / "test.jsonl"), corpus=str(demo)).load().records(SkipReport()))
    assert len(records) == 1 and records[0].text
    [open_record] = (
        ManifestDataset(str(demo / "test_open.jsonl"), corpus=str(demo)).load().records(SkipReport())
    )
    assert open_record.text == open_sentences()[0], "the open test set: the first hand-written sentence"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo"], "nothing written beside its folder"
