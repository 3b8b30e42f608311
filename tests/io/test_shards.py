import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest
import torch

from asr_pipeline.io import shards


def _records(n: int, cols: int = 4) -> list[dict]:
    rng = np.random.default_rng(0)
    return [
        {
            "id": f"u{i}",
            "features": rng.standard_normal((3 + i, cols)),
            "tokens": [1, 2, i + 1],
            "duration_ms": 30 + 10 * i,
            "text": f"text {i}",
        }
        for i in range(n)
    ]


def test_features_are_flattened_row_major_with_their_shape(tmp_path):
    records = _records(3)
    path = tmp_path / shards.shard_name(0)
    shards.write_shard(shards.records_to_table(records), path)
    table = pq.read_table(path)
    assert table.schema.equals(shards.SHARD_SCHEMA)
    second = shards.read_example(table, 1)
    assert (second["rows"], second["cols"]) == (4, 4)
    np.testing.assert_allclose(second["features"], records[1]["features"].astype(np.float32))
    assert [e["id"] for e in shards.iter_examples(path)] == ["u0", "u1", "u2"]


def test_same_records_give_byte_identical_shards(tmp_path):
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    shards.write_shard(shards.records_to_table(_records(5)), a)
    shards.write_shard(shards.records_to_table(_records(5)), b)
    assert a.read_bytes() == b.read_bytes()
    assert shards.fingerprint(a) == shards.fingerprint(b)


def test_fingerprint_changes_with_content_and_no_tmp_file_survives(tmp_path):
    path = tmp_path / "s.parquet"
    shards.write_shard(shards.records_to_table(_records(2)), path)
    first = shards.fingerprint(path)
    shards.write_shard(shards.records_to_table(_records(3)), path)
    assert shards.fingerprint(path) != first
    assert [p.name for p in tmp_path.iterdir()] == ["s.parquet"]


def test_empty_table_is_a_valid_shard(tmp_path):
    path = tmp_path / "empty.parquet"
    shards.write_shard(shards.records_to_table([]), path)
    assert pq.read_table(path).num_rows == 0


def test_float16_shards_store_half_floats_and_read_back_as_float32(tmp_path):
    records = _records(3, cols=80)
    path = tmp_path / shards.shard_name(0)

    shards.write_shard(shards.records_to_table(records, feature_dtype="float16"), path)

    table = pq.read_table(path)
    assert table.schema.equals(shards.shard_schema("float16"))
    assert pl.read_parquet(path).schema["features"] == pl.List(pl.Float16)  # polars reads them natively
    for original, example in zip(records, shards.iter_examples(path), strict=True):
        assert example["features"].dtype == np.float32 and example["features"].shape == (example["rows"], 80)
        half = original["features"].astype(np.float16).astype(np.float32)
        np.testing.assert_array_equal(example["features"], half)
        np.testing.assert_array_equal(shards.read_example(table, int(example["id"][1:]))["features"], half)


def test_float16_shards_are_about_half_the_size(tmp_path):
    records = _records(20, cols=80)
    sizes = {}
    for dtype in ("float32", "float16"):
        path = tmp_path / f"{dtype}.parquet"
        shards.write_shard(shards.records_to_table(records, feature_dtype=dtype), path)
        sizes[dtype] = path.stat().st_size

    assert sizes["float16"] < 0.6 * sizes["float32"]


def test_a_value_float16_cannot_hold_is_rejected_naming_the_example():
    records = _records(2)
    records[1]["features"][0, 0] = 1e5

    with pytest.raises(ValueError, match=r"u1: a feature value of magnitude 1e\+05 does not fit float16"):
        shards.records_to_table(records, feature_dtype="float16")


def test_the_training_dataset_reads_a_float16_shard_as_float32_tensors(tmp_path):
    from asr_pipeline.data.dataset import ShardDataset
    from asr_pipeline.data.length_index import build_length_index

    records = _records(3, cols=80)
    path = tmp_path / shards.shard_name(0)
    shards.write_shard(shards.records_to_table(records, feature_dtype="float16"), path)

    dataset = ShardDataset(build_length_index([path]))

    items = [dataset[i] for i in range(len(dataset))]
    assert sorted(item["id"] for item in items) == ["u0", "u1", "u2"]
    for item in items:
        original = records[int(item["id"][1:])]["features"]
        assert item["features"].dtype == torch.float32 and item["features"].shape == original.shape
        torch.testing.assert_close(
            item["features"], torch.from_numpy(original.astype(np.float16).astype(np.float32))
        )
