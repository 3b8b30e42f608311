import numpy as np
import pyarrow.parquet as pq

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
