import pytest
from kedro.io import DatasetError

from asr_pipeline.io.datasets import (
    BinaryFileDataset,
    DirectoryDataset,
    FeatureShardsDataset,
    ManifestDataset,
    ShardChunk,
)
from asr_pipeline.io.report import SkipReport
from asr_pipeline.io.shards import records_to_table
from tests.conftest import make_wav


def test_binary_file_round_trips(tmp_path):
    dataset = BinaryFileDataset(str(tmp_path / "x" / "model.bin"))
    dataset.save(b"\x00\x01")
    assert dataset.load() == b"\x00\x01"


def test_manifest_dataset_writes_files_next_to_the_manifest_and_reads_records(tmp_path):
    dataset = ManifestDataset(str(tmp_path / "dev.jsonl"))
    dataset.save(
        {
            "dev.jsonl": b'{"id": "a", "audio_path": "dev/a.wav", "text": "x"}\n',
            "dev/a.wav": lambda: make_wav(),
        }
    )
    assert (tmp_path / "dev" / "a.wav").is_file()
    [record] = list(dataset.load().records(SkipReport()))
    assert record.audio_path == str(tmp_path / "dev" / "a.wav")


def test_manifest_dataset_refuses_paths_outside_its_folder(tmp_path):
    dataset = ManifestDataset(str(tmp_path / "train"))
    with pytest.raises(DatasetError, match="outside"):
        dataset.save({"../escape.wav": b""})


def test_missing_manifest_says_what_to_do(tmp_path):
    with pytest.raises(DatasetError, match="demo_corpus"):
        ManifestDataset(str(tmp_path / "nope.jsonl")).load()


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
