"""Map-style dataset over feature shards, addressed through a length index.

Item ``i`` is the example at row ``index["row"][i]`` of shard ``index["shard"][i]`` (see
``data.length_index``). A batch sampler picks lists of items by their lengths; ``data.collate`` pads them.

Item schema (one example)::

    id            str
    features      (T, F) float32   SpecAugment already applied when the dataset has a transform
    tokens        (U,)   int64     CTC model ids, blank excluded
    text          str              normalized transcript (the reference for CER/WER)
    duration_ms   int

    T frames, F feature bins, U target tokens.

Shards are opened lazily, once per process: a DataLoader worker that never touches a shard never opens
it. Tables are read with ``memory_map=True`` so the file bytes are page cache shared by all workers;
zstd pages are decompressed on open, so each open shard costs its decompressed size per worker, which
``max_open_shards`` bounds (least recently used shards are closed first).

Reading is a batch at a time (``ShardDataset.__getitems__``, which ``DataLoader`` calls with a batch's
indices): an open shard keeps its columns as flat arrays (``OpenShard``), and each example's features are
converted from the stored dtype (float16 or float32) straight into one float32 buffer per batch, by torch's
vectorized copy. ``benchmarks/bench_loader_rate.py`` measures the loader (docs/results/data-loading.md:
1.23x the per-example reads through pyarrow scalars and NumPy's float16 conversion, in one process).
"""

from __future__ import annotations

import os
import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import torch
from torch import Tensor
from torch.utils.data import Dataset

from asr_pipeline.io.shards import fingerprint


class ShardDataset(Dataset):
    """Examples of the shards listed in a length index, in index order.

    ``dataset[i]`` reads one example; ``dataset.__getitems__(keys)``, which ``DataLoader`` calls for a whole
    batch, returns the same items (the same values, the transform's random draws in the same order) with
    their features converted into one buffer per batch.
    """

    def __init__(
        self,
        index: pa.Table,
        transform: Callable[[Tensor], Tensor] | None = None,
        max_open_shards: int | None = None,
        transform_for_epoch: Callable[[int], Callable[[Tensor], Tensor]] | None = None,
    ) -> None:
        shard_codes = pc.dictionary_encode(index.column("shard")).combine_chunks()
        self.shard_paths: list[str] = shard_codes.dictionary.to_pylist()
        # The shard of every item (an index into shard_paths): samplers keep batches within a few shards
        # at a time (data.sampler, shard windows) so that an epoch opens each shard once.
        self.shard_of = shard_codes.indices.to_numpy().astype(np.int32)
        self._row_of = index.column("row").to_numpy().astype(np.int64)
        self._fingerprints = _one_fingerprint_per_shard(index, self.shard_paths)
        self.num_frames = index.column("rows").to_numpy().astype(np.int64)  # T per item, for samplers
        self.num_tokens = index.column("tokens").to_numpy().astype(np.int64)  # U per item
        self.duration_ms = index.column("duration_ms").to_numpy().astype(np.int64)
        if max_open_shards is not None and max_open_shards < 1:
            raise ValueError(f"max_open_shards must be >= 1 or None, got {max_open_shards}")
        self.transform = transform
        # Training control (training.epoch_schedule): the epoch's transform, for (epoch, index) keys
        # (data.audio_dataset.EpochTaggedBatchSampler); plain index keys use ``transform``.
        self.transform_for_epoch = transform_for_epoch
        self.max_open_shards = max_open_shards
        self._tables: OrderedDict[int, OpenShard] = OrderedDict()
        self._owner_pid = os.getpid()

    def __len__(self) -> int:
        return len(self._row_of)

    def __getitem__(self, key: int | tuple[int, int]) -> dict:
        return self.__getitems__([key])[0]

    def __getitems__(self, keys: Sequence[int | tuple[int, int]]) -> list[dict]:
        """The items of ``keys`` (plain indices, or ``(epoch, index)`` pairs), in order."""
        located = []  # (epoch, shard, row) per key
        for key in keys:
            epoch, item = key if isinstance(key, tuple) else (None, key)
            located.append((epoch, int(self.shard_of[item]), int(self._row_of[item])))
        # Held here as well as in the LRU: a batch may span more shards than max_open_shards keeps.
        shards = {shard: self._table(shard) for shard in dict.fromkeys(shard for _, shard, _ in located)}
        sizes = [shards[shard].feature_size(row) for _, shard, row in located]
        # One float32 buffer for the batch's features, converted from the stored dtype in one copy each.
        buffer = torch.empty(sum(sizes), dtype=torch.float32)
        items, offset = [], 0
        for (epoch, shard, row), size in zip(located, sizes, strict=True):
            features = buffer[offset : offset + size]
            offset += size
            item = shards[shard].item(row, features)
            transform = self.transform
            if epoch is not None and self.transform_for_epoch is not None:
                transform = self.transform_for_epoch(epoch)
            if transform is not None:
                item["features"] = transform(item["features"])
            items.append(item)
        return items

    def _table(self, shard: int) -> OpenShard:
        # A forked DataLoader worker inherits the parent's open tables; it must open its own.
        if os.getpid() != self._owner_pid:
            self._tables = OrderedDict()
            self._owner_pid = os.getpid()
        table = self._tables.pop(shard, None)
        if table is None:
            table = self._open(shard)
        self._tables[shard] = table  # most recently used last
        if self.max_open_shards is not None and len(self._tables) > self.max_open_shards:
            self._tables.popitem(last=False)
        return table

    def _open(self, shard: int) -> OpenShard:
        path = self.shard_paths[shard]
        if fingerprint(path) != self._fingerprints[shard]:
            raise RuntimeError(
                f"shard {path} changed after its length index was built (fingerprint "
                f"{fingerprint(path)} != {self._fingerprints[shard]}); rebuild the index (dvc repro index)"
            )
        return OpenShard(pq.read_table(path, memory_map=True))

    def __getstate__(self) -> dict:
        # Open tables never travel to worker processes (spawn): each worker opens its own.
        state = self.__dict__.copy()
        state["_tables"] = OrderedDict()
        return state


class OpenShard:
    """One shard's table, read once, as arrays an item is cut from without per-value Python work.

    The features stay in the stored dtype, in the table's own (decompressed) buffers, one per row group:
    an item's are converted to float32 as they are copied out (``item``), never in place.
    """

    def __init__(self, table: pa.Table) -> None:
        self.nbytes = table.nbytes
        self.ids = table.column("id").to_pylist()
        self.texts = table.column("text").to_pylist()
        self.rows = table.column("rows").to_numpy()
        self.cols = table.column("cols").to_numpy()
        self.duration_ms = table.column("duration_ms").to_numpy()
        self._tokens = RowValues(table.column("tokens"))
        self._features = RowValues(table.column("features"))
        with warnings.catch_warnings():  # read-only Arrow memory: only ever read from (class docstring)
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            self._feature_chunks = [torch.from_numpy(values) for values in self._features.chunks]

    def feature_size(self, row: int) -> int:
        return self._features.size(row)

    def item(self, row: int, features: Tensor) -> dict:
        """Example ``row``, its features copied into ``features`` (float32, ``feature_size(row)`` values)."""
        chunk, start, end = self._features.where(row)
        features.copy_(self._feature_chunks[chunk][start:end])
        chunk, start, end = self._tokens.where(row)
        return {
            "id": self.ids[row],
            "features": features.view(int(self.rows[row]), int(self.cols[row])),  # (T, F)
            "tokens": torch.from_numpy(self._tokens.chunks[chunk][start:end].astype(np.int64)),  # (U,)
            "text": self.texts[row],
            "duration_ms": int(self.duration_ms[row]),
        }


class RowValues:
    """A list column's values, chunk by chunk (zero-copy NumPy arrays), and where each row's lie."""

    def __init__(self, column: pa.ChunkedArray) -> None:
        self.chunks: list[np.ndarray] = []
        chunk_of, starts, ends = [], [], []
        for index, chunk in enumerate(column.chunks):
            offsets = chunk.offsets.to_numpy()  # (rows + 1,): positions in chunk.values, past any slice
            first = int(offsets[0])
            values = chunk.values.slice(first, int(offsets[-1]) - first)
            self.chunks.append(values.to_numpy(zero_copy_only=False))
            chunk_of.append(np.full(len(chunk), index, dtype=np.int64))
            starts.append(offsets[:-1] - first)
            ends.append(offsets[1:] - first)
        self._chunk_of = np.concatenate(chunk_of) if chunk_of else np.zeros(0, dtype=np.int64)
        self._starts = np.concatenate(starts) if starts else np.zeros(0, dtype=np.int64)
        self._ends = np.concatenate(ends) if ends else np.zeros(0, dtype=np.int64)

    def where(self, row: int) -> tuple[int, int, int]:
        """Row ``row``'s chunk and its first and past-the-last positions in that chunk's values."""
        return int(self._chunk_of[row]), int(self._starts[row]), int(self._ends[row])

    def size(self, row: int) -> int:
        return int(self._ends[row] - self._starts[row])


def _one_fingerprint_per_shard(index: pa.Table, shard_paths: list[str]) -> list[str]:
    by_shard: dict[str, str] = {}
    for shard, print_ in zip(
        index.column("shard").to_pylist(), index.column("shard_fingerprint").to_pylist(), strict=True
    ):
        by_shard.setdefault(shard, print_)
    return [by_shard[path] for path in shard_paths]


@dataclass(frozen=True)
class SelectionReport:
    """What ``select_examples`` kept and why it dropped the rest (reported, never lost silently).

    ``skipped``: records of raw manifests left out before selection (unreadable audio, no tokens, ...;
    ``data.audio_dataset``), not counted in ``available``; always 0 for feature shards.
    """

    available: int
    kept: int
    too_long: int
    over_max_samples: int
    skipped: int = 0


def select_examples(
    index: pa.Table, *, max_duration_ms: int | None = None, max_samples: int | None = None
) -> tuple[pa.Table, SelectionReport]:
    """Drop examples longer than ``max_duration_ms``, then keep the first ``max_samples`` in index order."""
    available = index.num_rows
    if max_duration_ms is not None:
        index = index.filter(pc.less_equal(index.column("duration_ms"), max_duration_ms))
    too_long = available - index.num_rows
    within = index.num_rows
    if max_samples is not None:
        index = index.slice(0, max_samples)
    return index, SelectionReport(available, index.num_rows, too_long, within - index.num_rows)


__all__ = ["OpenShard", "RowValues", "SelectionReport", "ShardDataset", "select_examples"]
