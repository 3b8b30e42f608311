import json
import shutil

import pytest
from kedro.io import DatasetError

from asr_pipeline.io.datasets import DemoCorpusDataset, ManifestDataset
from asr_pipeline.io.report import SkipReport
from asr_pipeline.pipelines.demo_corpus import create_pipeline
from tests.pipelines.conftest import run_stage

needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="needs espeak-ng (make setup)")
PARAMS = {"demo_corpus": {"train_size": 3, "dev_size": 2, "test_size": 1, "seed": 7, "max_duration_sec": 6.0}}


@needs_espeak
def test_demo_corpus_stage_writes_an_audio_folder_and_two_jsonl_manifests_in_its_own_folder(tmp_path):
    demo = tmp_path / "demo"
    run_stage(create_pipeline(), {}, datasets={"demo_corpus_files": DemoCorpusDataset(str(demo))}, params=PARAMS)

    assert sorted(p.name for p in (demo / "train").iterdir()) == [
        f"train-00000{i}.{ext}" for i in (1, 2, 3) for ext in ("txt", "wav")
    ]
    dev = [json.loads(line) for line in (demo / "dev.jsonl").read_text().splitlines()]
    assert [row["audio_path"] for row in dev] == ["dev/dev-000001.wav", "dev/dev-000002.wav"]
    records = list(ManifestDataset(str(demo / "test.jsonl"), corpus=str(demo)).load().records(SkipReport()))
    assert len(records) == 1 and records[0].text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo"], "nothing written beside its folder"


def test_the_demo_refuses_to_write_into_a_folder_that_holds_someone_elses_files(tmp_path):
    corpus = tmp_path / "mine"
    (corpus / "train").mkdir(parents=True)
    (corpus / "train" / "a.txt").write_text("my own words")
    (corpus / "dev.jsonl").write_text('{"audio_path": "a.wav", "text": "x"}\n')

    with pytest.raises(DatasetError, match=r"holds files the demo_corpus stage did not write"):
        DemoCorpusDataset(str(corpus)).save({"dev.jsonl": b"demo", "train/a.txt": b"demo"})

    assert (corpus / "train" / "a.txt").read_text() == "my own words"
    assert (corpus / "dev.jsonl").read_text() == '{"audio_path": "a.wav", "text": "x"}\n'


def test_the_demo_rewrites_its_own_folder_and_never_writes_outside_it(tmp_path):
    demo = DemoCorpusDataset(str(tmp_path / "demo"))
    demo.save({"dev.jsonl": b"one"})
    demo.save({"dev.jsonl": b"two"})  # its own marker is there: a rebuild is allowed

    assert (tmp_path / "demo" / "dev.jsonl").read_bytes() == b"two"
    with pytest.raises(DatasetError, match="outside"):
        demo.save({"../escape.txt": b"x"})
    assert not (tmp_path / "escape.txt").exists()


def test_a_raw_manifest_is_an_input_that_no_stage_can_write(tmp_path):
    (tmp_path / "dev.jsonl").write_text("{}\n")

    with pytest.raises(DatasetError, match="never a stage output"):
        ManifestDataset(str(tmp_path / "dev.jsonl")).save({"dev.jsonl": b"{}"})
    assert (tmp_path / "dev.jsonl").read_text() == "{}\n"


def test_a_manifest_outside_the_tracked_corpus_folder_is_refused_with_the_setting_to_change(tmp_path):
    (tmp_path / "corpus").mkdir()
    (tmp_path / "elsewhere.jsonl").write_text("{}\n")

    with pytest.raises(DatasetError, match=r"outside paths.corpus=.*globals.yml"):
        ManifestDataset(str(tmp_path / "elsewhere.jsonl"), corpus=str(tmp_path / "corpus")).load()


def test_a_missing_manifest_says_how_to_build_the_demo_or_point_at_your_data(tmp_path):
    with pytest.raises(DatasetError, match=r"dvc repro demo_corpus.*paths.corpus"):
        ManifestDataset(str(tmp_path / "train")).load()
