import pytest
from kedro.io import DatasetError

from asr_pipeline.io.datasets import (
    BinaryFileDataset,
    DemoCorpusDataset,
    DirectoryDataset,
    FeatureShardsDataset,
    ManifestDataset,
    ShardChunk,
)
from asr_pipeline.io.report import SkipReport
from asr_pipeline.io.shards import records_to_table


def test_binary_file_round_trips(tmp_path):
    dataset = BinaryFileDataset(str(tmp_path / "x" / "model.bin"))
    dataset.save(b"\x00\x01")
    assert dataset.load() == b"\x00\x01"


def test_manifest_dataset_reads_records_with_paths_relative_to_the_manifest(tmp_path):
    (tmp_path / "dev.jsonl").write_text('{"id": "a", "audio_path": "dev/a.wav", "text": "x"}\n')

    [record] = list(
        ManifestDataset(str(tmp_path / "dev.jsonl"), corpus=str(tmp_path)).load().records(SkipReport())
    )

    assert record.audio_path == str(tmp_path / "dev" / "a.wav")


def test_the_demo_refuses_to_write_into_a_folder_that_holds_someone_elses_files(tmp_path):
    corpus = tmp_path / "mine"
    (corpus / "train").mkdir(parents=True)
    (corpus / "train" / "a.txt").write_text("my own words")
    (corpus / "dev.jsonl").write_text('{"audio_path": "a.wav", "text": "x"}\n')

    with pytest.raises(DatasetError, match=r"holds files the demo_corpus stage did not write"):
        DemoCorpusDataset(str(corpus)).save({"dev.jsonl": b"demo", "train/a.txt": b"demo"})

    assert (corpus / "train" / "a.txt").read_text() == "my own words"
    assert (corpus / "dev.jsonl").read_text() == '{"audio_path": "a.wav", "text": "x"}\n'


def test_the_demo_rebuilds_its_own_folder_from_scratch_and_never_writes_outside_it(tmp_path):
    demo = DemoCorpusDataset(str(tmp_path / "demo"))
    demo.save({"dev.jsonl": b"one", "train/old-utterance.wav": b"RIFF"})
    demo.save({"dev.jsonl": b"two"})  # its own marker is there: a rebuild is allowed

    assert (tmp_path / "demo" / "dev.jsonl").read_bytes() == b"two"
    assert not (tmp_path / "demo" / "train").exists(), "no file of the earlier (larger) build lingers"
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


def test_an_optional_split_set_to_null_is_a_manifest_without_records(tmp_path):
    dataset = ManifestDataset(None, corpus=str(tmp_path), setting="paths.raw_test_open", optional=True)

    assert dataset.exists()
    assert list(dataset.load().records(SkipReport())) == []


def test_a_required_split_set_to_null_is_refused_naming_the_setting(tmp_path):
    with pytest.raises(DatasetError, match=r"paths.raw_test is null in conf/base/globals.yml.*required"):
        ManifestDataset(None, corpus=str(tmp_path), setting="paths.raw_test").load()


def test_an_optional_manifest_outside_the_corpus_says_it_may_be_null(tmp_path):
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "test_open.jsonl").write_text("")
    dataset = ManifestDataset(
        str(tmp_path / "demo" / "test_open.jsonl"),
        str(tmp_path / "mine"),
        "paths.raw_test_open",
        optional=True,
    )

    with pytest.raises(DatasetError, match=r"outside paths.corpus.*set paths.raw_test_open: null"):
        dataset.load()


def test_shard_chunk_zero_replaces_an_earlier_run(tmp_path):
    dataset = FeatureShardsDataset(str(tmp_path / "train"))
    table = records_to_table([])
    for index in range(3):
        dataset.save(ShardChunk(index, table))
    (tmp_path / "train" / "shard-00009.parquet.tmp").write_bytes(b"partial")
    dataset.save(ShardChunk(0, table))
    assert [p.rsplit("/", 1)[1] for p in dataset.load()] == ["shard-00000.parquet"]
    assert not list((tmp_path / "train").glob("*.tmp"))


def test_directory_dataset_creates_and_cannot_be_saved(tmp_path):
    dataset = DirectoryDataset(str(tmp_path / "run"))
    assert dataset.load().is_dir()
    with pytest.raises(DatasetError):
        dataset.save(None)
