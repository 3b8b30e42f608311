"""data.sources: a training manifest path is feature shards or a raw manifest, told from the Parquet footer;
folders expand to their shards; a missing path, an empty folder and every mix are refused naming a path."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from asr_pipeline.data.sources import is_feature_shard, resolve_manifests
from asr_pipeline.io.shards import records_to_table, shard_name, write_shard


def write_shards(folder, count: int):
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for index in range(count):
        record = {
            "id": f"u{index}",
            "features": np.zeros((2, 3)),
            "tokens": [1],
            "duration_ms": 20,
            "text": "a",
        }
        paths.append(folder / shard_name(index))
        write_shard(records_to_table([record]), paths[-1])
    return paths


def write_records(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"audio_filepath": ["a.wav"], "text": ["a"]}), path)
    return path


def test_a_shard_is_a_parquet_file_with_every_shard_column(tmp_path):
    (shard,) = write_shards(tmp_path / "shards", 1)
    records = write_records(tmp_path / "records.parquet")
    (tmp_path / "notes.parquet.txt").write_text("x")

    assert is_feature_shard(shard)
    assert not is_feature_shard(records)
    assert not is_feature_shard(tmp_path / "notes.parquet.txt")
    assert not is_feature_shard(tmp_path / "missing.parquet")


def test_a_broken_parquet_file_is_refused_naming_it(tmp_path):
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"not parquet at all")

    with pytest.raises(ValueError, match=r"broken.parquet: not a readable Parquet file"):
        is_feature_shard(broken)


def test_folders_expand_to_their_shards_in_order_and_files_keep_their_order(tmp_path):
    first = write_shards(tmp_path / "train", 2)
    second = write_shards(tmp_path / "more", 1)

    resolved = resolve_manifests([tmp_path / "train", second[0]])

    assert resolved.kind == "shards"
    assert resolved.paths == [str(p) for p in first + second]


def test_a_folder_of_other_files_or_a_records_file_is_one_raw_manifest(tmp_path):
    (tmp_path / "audio").mkdir()
    (tmp_path / "audio" / "a.wav").write_bytes(b"")
    records = write_records(tmp_path / "records.parquet")

    resolved = resolve_manifests([tmp_path / "audio", records])

    assert (resolved.kind, resolved.paths) == ("raw", [str(tmp_path / "audio"), str(records)])


def test_a_missing_path_an_empty_folder_and_mixes_are_refused(tmp_path):
    (shard,) = write_shards(tmp_path / "shards", 1)
    records = write_records(tmp_path / "records.parquet")
    (tmp_path / "empty").mkdir()

    with pytest.raises(ValueError, match=r"dev manifest .*nowhere: no such file or folder"):
        resolve_manifests([tmp_path / "nowhere"], what="dev manifest")
    with pytest.raises(ValueError, match="empty: the folder is empty"):
        resolve_manifests([tmp_path / "empty"])
    with pytest.raises(ValueError, match=r"mix feature shards .* and raw manifests"):
        resolve_manifests([shard, records])
    (tmp_path / "loose").mkdir()
    write_shards(tmp_path / "loose", 1)[0].rename(tmp_path / "loose" / "features.parquet")
    write_records(tmp_path / "loose" / "other.parquet")
    with pytest.raises(
        ValueError, match=r"holds feature shards and other Parquet files \(e.g. other.parquet\)"
    ):
        resolve_manifests([tmp_path / "loose"])
