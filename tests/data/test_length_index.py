from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from asr_pipeline.data.length_index import (
    LENGTH_INDEX_SCHEMA,
    build_length_index,
    cached_length_index,
    index_is_current,
    load_length_index,
)
from asr_pipeline.io.shards import fingerprint

from .conftest import write_random_shard


def test_index_has_one_row_per_example_with_lengths_token_counts_and_fingerprints(two_shards):
    index = build_length_index(two_shards)

    assert index.schema == LENGTH_INDEX_SCHEMA
    assert index.column("shard").to_pylist() == [str(two_shards[0])] * 5 + [str(two_shards[1])] * 3
    assert (
        index.column("shard_fingerprint").to_pylist()
        == [fingerprint(two_shards[0])] * 5 + [fingerprint(two_shards[1])] * 3
    )
    assert index.column("row").to_pylist() == [0, 1, 2, 3, 4, 0, 1, 2]
    assert index.column("rows").to_pylist() == [10, 20, 30, 40, 7, 15, 25, 35]
    assert index.column("cols").to_pylist() == [4] * 8
    assert index.column("tokens").to_pylist() == [1, 2, 3, 4, 5, 1, 2, 3]  # i % 5 + 1 tokens
    assert index.column("duration_ms").to_pylist() == [100, 200, 300, 400, 70, 150, 250, 350]


def test_building_the_index_never_reads_the_features_column(two_shards, monkeypatch):
    requested: list[object] = []
    real_read_table = pq.read_table

    def spy_read_table(source, *args, columns=None, **kwargs):
        requested.append(columns)
        return real_read_table(source, *args, columns=columns, **kwargs)

    def forbidden(*args, **kwargs):
        raise AssertionError("the length index must read columns through read_table(columns=...)")

    monkeypatch.setattr(pq, "read_table", spy_read_table)
    for method in ("read", "read_row_group", "read_row_groups", "iter_batches"):
        monkeypatch.setattr(pq.ParquetFile, method, forbidden)

    build_length_index(two_shards)

    assert len(requested) == len(two_shards)
    assert all(columns is not None and "features" not in columns for columns in requested), requested


def test_index_is_current_only_for_exactly_its_shards_unchanged(two_shards, tmp_path):
    index = build_length_index(two_shards)
    assert index_is_current(index, two_shards)
    assert index_is_current(index, [str(p) for p in two_shards])

    assert not index_is_current(index, two_shards[:1]), "an extra shard in the index"
    third = write_random_shard(tmp_path / "shard-00002.parquet", [5])
    assert not index_is_current(index, [*two_shards, third]), "a shard missing from the index"


def test_a_rewritten_shard_makes_the_index_stale(two_shards):
    index = build_length_index(two_shards)
    write_random_shard(two_shards[1], [15, 25, 36], prefix="b", seed=2)  # one frame longer

    assert not index_is_current(index, two_shards)


def test_a_deleted_shard_makes_the_index_stale(two_shards):
    index = build_length_index(two_shards)
    two_shards[0].unlink()

    assert not index_is_current(index, two_shards)


def test_an_empty_shard_is_covered_while_it_stays_empty(two_shards, tmp_path):
    empty = write_random_shard(tmp_path / "shard-00009.parquet", [])
    index = build_length_index([*two_shards, empty])

    assert index.num_rows == 8
    assert index_is_current(index, [*two_shards, empty])
    write_random_shard(empty, [3])
    assert not index_is_current(index, [*two_shards, empty])


def test_load_takes_the_rows_of_the_asked_shards_from_a_current_index_file(two_shards, tmp_path, monkeypatch):
    index_path = tmp_path / "length_index.parquet"
    pq.write_table(build_length_index(two_shards), index_path)

    def no_rebuild(*args, **kwargs):
        raise AssertionError("a current index must be used, not rebuilt")

    monkeypatch.setattr("asr_pipeline.data.length_index.build_length_index", no_rebuild)
    loaded = load_length_index([two_shards[1], two_shards[0]], index_path)

    assert loaded.column("rows").to_pylist() == [15, 25, 35, 10, 20, 30, 40, 7]  # in the order asked


def test_load_rebuilds_a_stale_index_instead_of_using_it(two_shards, tmp_path):
    index_path = tmp_path / "length_index.parquet"
    pq.write_table(build_length_index(two_shards), index_path)
    write_random_shard(two_shards[0], [11, 12], prefix="a", seed=1)

    loaded = load_length_index(two_shards, index_path)

    assert loaded.column("rows").to_pylist() == [11, 12, 15, 25, 35]
    assert pq.read_table(index_path).num_rows == 8, "the index file belongs to the index stage: not rewritten"


@pytest.mark.parametrize("index_path", [None, "missing.parquet"])
def test_load_builds_the_index_when_there_is_no_file(two_shards, tmp_path: Path, index_path):
    path = None if index_path is None else tmp_path / index_path
    assert load_length_index(two_shards, path).num_rows == 8


def test_the_index_cache_folder_is_written_once_reused_and_rebuilt_when_a_shard_changes(tmp_path):
    shards = [
        str(write_random_shard(tmp_path / "a.parquet", [5, 9, 7], prefix="a")),
        str(write_random_shard(tmp_path / "b.parquet", [4, 6], prefix="b")),
    ]
    cache = tmp_path / "cache"

    first = cached_length_index(shards, cache)
    (cached,) = cache.glob("length_index-*.parquet")
    written = cached.stat().st_mtime_ns
    again = cached_length_index(shards, cache)
    unchanged = cached.stat().st_mtime_ns
    write_random_shard(tmp_path / "b.parquet", [4, 6, 12], prefix="b", seed=1)  # re-extracted
    rebuilt = cached_length_index(shards, cache)

    assert first.equals(again) and unchanged == written  # a current cache is read, not rewritten
    assert first.column("rows").to_pylist() == [5, 9, 7, 4, 6]
    assert rebuilt.column("rows").to_pylist() == [5, 9, 7, 4, 6, 12]
    assert pq.read_table(cached).num_rows == 6  # the stale file was replaced
    assert [p.name for p in cache.iterdir()] == [cached.name]  # no temporary files left behind
