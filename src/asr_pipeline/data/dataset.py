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
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import torch
from torch import Tensor
from torch.utils.data import Dataset

from asr_pipeline.io.shards import fingerprint, read_example


class ShardDataset(Dataset):
    """Examples of the shards listed in a length index, in index order."""

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
        self._tables: OrderedDict[int, pa.Table] = OrderedDict()
        self._owner_pid = os.getpid()

    def __len__(self) -> int:
        return len(self._row_of)

    def __getitem__(self, key: int | tuple[int, int]) -> dict:
        epoch, item = key if isinstance(key, tuple) else (None, key)
        shard, row = int(self.shard_of[item]), int(self._row_of[item])
        record = read_example(self._table(shard), row)
        features = torch.tensor(record["features"], dtype=torch.float32)  # (T, F), a writable copy
        transform = self.transform
        if epoch is not None and self.transform_for_epoch is not None:
            transform = self.transform_for_epoch(epoch)
        if transform is not None:
            features = transform(features)
        return {
            "id": record["id"],
            "features": features,
            "tokens": torch.tensor(record["tokens"], dtype=torch.int64),  # (U,)
            "text": record["text"],
            "duration_ms": int(record["duration_ms"]),
        }

    def _table(self, shard: int) -> pa.Table:
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

    def _open(self, shard: int) -> pa.Table:
        path = self.shard_paths[shard]
        if fingerprint(path) != self._fingerprints[shard]:
            raise RuntimeError(
                f"shard {path} changed after its length index was built (fingerprint "
                f"{fingerprint(path)} != {self._fingerprints[shard]}); rebuild the index (dvc repro index)"
            )
        return pq.read_table(path, memory_map=True)

    def __getstate__(self) -> dict:
        # Open tables never travel to worker processes (spawn): each worker opens its own.
        state = self.__dict__.copy()
        state["_tables"] = OrderedDict()
        return state


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


__all__ = ["SelectionReport", "ShardDataset", "select_examples"]
