from __future__ import annotations

import pickle

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from torch.utils.data import DataLoader

from asr_pipeline.data.collate import collate_batch
from asr_pipeline.data.dataset import ShardDataset, select_examples
from asr_pipeline.data.length_index import build_length_index
from asr_pipeline.data.sampler import LengthBucketedBatchSampler
from asr_pipeline.features.augment import SpecAugment
from asr_pipeline.io.shards import iter_examples, records_to_table, write_shard

from .conftest import write_random_shard


def test_item_i_is_the_example_at_row_i_of_the_index(two_shards):
    dataset = ShardDataset(build_length_index(two_shards))
    expected = list(iter_examples(two_shards[1]))[2]

    item = dataset[7]  # 5 examples in shard 0, so item 7 is row 2 of shard 1

    assert item["id"] == expected["id"] == "b-002"
    assert item["features"].dtype == torch.float32
    assert item["features"].shape == (35, 4)  # (T, F)
    np.testing.assert_array_equal(item["features"].numpy(), expected["features"])
    assert item["tokens"].dtype == torch.int64
    assert item["tokens"].tolist() == [1, 2, 3]
    assert item["text"] == "text b 2"
    assert item["duration_ms"] == 350
    assert len(dataset) == 8
    assert dataset.num_frames.tolist() == [10, 20, 30, 40, 7, 15, 25, 35]


def test_shards_are_opened_lazily_and_only_when_touched(two_shards):
    dataset = ShardDataset(build_length_index(two_shards))
    assert len(dataset._tables) == 0

    dataset[1]
    dataset[2]

    assert list(dataset._tables) == [0], "only shard 0 was needed"


def test_max_open_shards_closes_the_least_recently_used(two_shards):
    dataset = ShardDataset(build_length_index(two_shards), max_open_shards=1)
    dataset[0]
    dataset[6]

    assert list(dataset._tables) == [1]


def test_a_pickled_dataset_travels_without_its_open_tables(two_shards):
    dataset = ShardDataset(build_length_index(two_shards))
    dataset[0]

    copy = pickle.loads(pickle.dumps(dataset))

    assert len(copy._tables) == 0
    assert copy[0]["id"] == "a-000"


def test_the_transform_applies_to_the_features_only(two_shards):
    dataset = ShardDataset(build_length_index(two_shards), transform=lambda features: features * 0)

    item = dataset[0]

    assert torch.all(item["features"] == 0)
    assert item["tokens"].tolist() == [1]


def test_a_shard_rewritten_after_indexing_is_refused_with_its_path(two_shards):
    dataset = ShardDataset(build_length_index(two_shards))
    write_random_shard(two_shards[0], [3, 3], prefix="a")

    with pytest.raises(RuntimeError, match=r"shard-00000.parquet changed after its length index"):
        dataset[0]


def test_select_examples_drops_long_audio_then_caps_the_count_and_reports_both(two_shards):
    index = build_length_index(two_shards)  # durations 100, 200, 300, 400, 70, 150, 250, 350 ms

    kept, report = select_examples(index, max_duration_ms=300, max_samples=4)

    assert kept.column("duration_ms").to_pylist() == [100, 200, 300, 70]
    assert (report.available, report.kept, report.too_long, report.over_max_samples) == (8, 4, 2, 2)


def test_dataloader_workers_open_their_own_shards_and_yield_the_same_batches(two_shards):
    dataset = ShardDataset(build_length_index(two_shards))
    dataset[0]  # the parent has a table open; forked workers must not reuse it
    sampler = LengthBucketedBatchSampler(dataset.num_frames, budget=60, shuffle=False)

    def batches(num_workers: int) -> list[tuple[list[str], torch.Tensor]]:
        loader = DataLoader(dataset, batch_sampler=sampler, collate_fn=collate_batch, num_workers=num_workers)
        return [(batch.ids, batch.features) for batch in loader]

    in_process, in_workers = batches(0), batches(2)

    assert [ids for ids, _ in in_workers] == [ids for ids, _ in in_process]
    assert all(torch.equal(a, b) for (_, a), (_, b) in zip(in_workers, in_process, strict=True))


def float16_shard(path, frames):
    rng = np.random.default_rng(3)
    records = [
        {
            "id": f"h-{i:03d}",
            "features": rng.standard_normal((length, 4)).astype(np.float16),
            "tokens": list(range(1, i + 3)),
            "duration_ms": 10 * length,
            "text": f"half {i}",
        }
        for i, length in enumerate(frames)
    ]
    write_shard(records_to_table(records, "float16"), path)
    return path


def test_a_batch_read_gives_each_item_as_read_alone_with_the_same_random_masks(two_shards, tmp_path):
    shards = [*two_shards, float16_shard(tmp_path / "shard-00002.parquet", [12, 9, 30])]
    augment = SpecAugment(time_masks=2, time_mask_max_frames=5, freq_masks=1, freq_mask_max_bins=2)
    dataset = ShardDataset(build_length_index(shards), transform=augment)
    keys = [9, 0, 7, 3, 8, 5]  # three shards, out of index order, float16 and float32 storage

    torch.manual_seed(0)
    batched = dataset.__getitems__(keys)
    torch.manual_seed(0)
    one_by_one = [dataset[key] for key in keys]
    # The reference: every example as the shard reader gives it, masked in the same order of draws.
    examples = [example for shard in shards for example in iter_examples(shard)]
    torch.manual_seed(0)
    expected = [augment(torch.tensor(examples[key]["features"])) for key in keys]

    for got, alone, want, key in zip(batched, one_by_one, expected, keys, strict=True):
        assert got["id"] == alone["id"] == examples[key]["id"]
        assert got["features"].dtype == torch.float32
        assert torch.equal(got["features"], want) and torch.equal(alone["features"], want)
        assert got["tokens"].dtype == torch.int64
        assert got["tokens"].tolist() == alone["tokens"].tolist() == examples[key]["tokens"]
        assert (got["text"], got["duration_ms"]) == (examples[key]["text"], examples[key]["duration_ms"])
    assert not torch.equal(batched[2]["features"], torch.tensor(examples[7]["features"])), "masks were drawn"


def test_epoch_tagged_keys_take_their_epochs_transform_in_a_batch_read(two_shards):
    dataset = ShardDataset(
        build_length_index(two_shards),
        transform_for_epoch=lambda epoch: lambda features: features * 0 + epoch,
    )

    items = dataset.__getitems__([(2, 1), (5, 6)])

    assert torch.all(items[0]["features"] == 2) and torch.all(items[1]["features"] == 5)


def test_a_batch_over_more_shards_than_max_open_shards_reads_every_item(two_shards):
    dataset = ShardDataset(build_length_index(two_shards), max_open_shards=1)

    items = dataset.__getitems__([0, 6, 1, 7])

    assert [item["id"] for item in items] == ["a-000", "b-001", "a-001", "b-002"]
    assert len(dataset._tables) == 1


class OpenedShards(ShardDataset):
    """Returns, for a batch, the worker that read it and every shard that worker has opened so far."""

    def __getitems__(self, keys):
        super().__getitems__(keys)
        return torch.utils.data.get_worker_info().id, set(self._tables)


def test_each_loader_worker_opens_only_the_shards_the_sampler_gave_it(tmp_path):
    shards = [
        write_random_shard(tmp_path / f"shard-{i:05d}.parquet", [9] * 4, prefix=f"s{i}") for i in range(4)
    ]
    dataset = OpenedShards(build_length_index(shards))
    sampler = LengthBucketedBatchSampler(
        dataset.num_frames, batch_size=2, groups=dataset.shard_of, group_window=1, loader_workers=2
    )
    loader = DataLoader(dataset, batch_sampler=sampler, collate_fn=lambda got: got, num_workers=2)

    opened: dict[int, set[int]] = {}
    for worker, shards_open in loader:
        opened[worker] = shards_open

    assert len(opened[0]) == len(opened[1]) == 2
    assert opened[0] | opened[1] == {0, 1, 2, 3}


def test_rows_of_every_row_group_of_a_shard_are_read_from_their_own_group(tmp_path):
    shard = write_random_shard(tmp_path / "shard-00000.parquet", [3 + i % 5 for i in range(300)])
    assert pq.ParquetFile(shard).num_row_groups == 2, "write_shard's groups of 256 rows"
    dataset = ShardDataset(build_length_index([shard]))
    examples = list(iter_examples(shard))
    keys = [0, 255, 256, 299, 17]

    for key, item in zip(keys, dataset.__getitems__(keys), strict=True):
        assert item["id"] == examples[key]["id"]
        np.testing.assert_array_equal(item["features"].numpy(), examples[key]["features"])
        assert item["tokens"].tolist() == examples[key]["tokens"]
