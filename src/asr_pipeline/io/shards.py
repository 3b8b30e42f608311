"""Feature shards: the Parquet contract shared by extraction, the length index and training.

One row is one example. Columns (names follow the reference Rust trainer):

    id           string         utterance id, unique within a split
    features     list<float32>  (rows * cols) values, row-major: frame t, bin f at t * cols + f
    rows         int32          number of frames T
    cols         int32          feature dimension F
    tokens       list<int32>    CTC model ids (blank excluded, see text.tokenizer)
    duration_ms  int32          audio duration
    text         string         normalized transcript

A shard written by ``extract-features`` is directly usable as a training manifest.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

SHARD_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("features", pa.list_(pa.float32())),
        ("rows", pa.int32()),
        ("cols", pa.int32()),
        ("tokens", pa.list_(pa.int32())),
        ("duration_ms", pa.int32()),
        ("text", pa.string()),
    ]
)
METADATA_COLUMNS = ["id", "rows", "cols", "tokens", "duration_ms", "text"]
SHARD_GLOB = "shard-*.parquet"


def shard_name(index: int) -> str:
    return f"shard-{index:05d}.parquet"


def records_to_table(records: Iterable[dict]) -> pa.Table:
    """Build a shard table from dicts with ``features`` as a (T, F) float array."""
    columns: dict[str, list] = {name: [] for name in SHARD_SCHEMA.names}
    for record in records:
        features = np.asarray(record["features"], dtype=np.float32)
        if features.ndim != 2:
            raise ValueError(f"{record['id']}: features must be 2-D (T, F), got shape {features.shape}")
        columns["id"].append(record["id"])
        columns["features"].append(features.reshape(-1))
        columns["rows"].append(features.shape[0])
        columns["cols"].append(features.shape[1])
        columns["tokens"].append([int(t) for t in record["tokens"]])
        columns["duration_ms"].append(int(record["duration_ms"]))
        columns["text"].append(record["text"])
    arrays = [
        pa.array(columns["id"], pa.string()),
        pa.ListArray.from_arrays(
            _offsets(columns["rows"], columns["cols"]),
            pa.array(np.concatenate(columns["features"]) if columns["features"] else [], pa.float32()),
        ),
        pa.array(columns["rows"], pa.int32()),
        pa.array(columns["cols"], pa.int32()),
        pa.array(columns["tokens"], pa.list_(pa.int32())),
        pa.array(columns["duration_ms"], pa.int32()),
        pa.array(columns["text"], pa.string()),
    ]
    return pa.Table.from_arrays(arrays, schema=SHARD_SCHEMA)


def _offsets(rows: list[int], cols: list[int]) -> pa.Array:
    sizes = np.asarray(rows, dtype=np.int64) * np.asarray(cols, dtype=np.int64)
    return pa.array(np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32), pa.int32())


def write_shard(table: pa.Table, path: str | Path) -> None:
    """Write atomically: a killed writer leaves a ``.tmp`` file, never a complete-looking shard.

    Statistics and a fixed writer make the bytes a pure function of the table, so DVC deduplicates.
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(
        table, tmp, compression="zstd", row_group_size=256, write_statistics=False, store_schema=True
    )
    os.replace(tmp, path)


def list_shards(directory: str | Path) -> list[Path]:
    return sorted(Path(directory).glob(SHARD_GLOB))


def read_metadata(path: str | Path) -> pa.Table:
    """Every column except the (large) features."""
    return pq.read_table(path, columns=METADATA_COLUMNS)


def iter_examples(path: str | Path, batch_size: int = 256) -> Iterator[dict]:
    """Yield examples with ``features`` as a (T, F) float32 array."""
    parquet = pq.ParquetFile(path)
    for batch in parquet.iter_batches(batch_size=batch_size):
        for row in batch.to_pylist():
            row["features"] = np.asarray(row["features"], dtype=np.float32).reshape(row["rows"], row["cols"])
            yield row


def read_example(table: pa.Table, row: int) -> dict:
    """Example ``row`` of an already-loaded shard table, features as a (T, F) array."""
    record = {name: table.column(name)[row].as_py() for name in METADATA_COLUMNS}
    flat = table.column("features")[row].values.to_numpy(zero_copy_only=False)
    record["features"] = flat.reshape(record["rows"], record["cols"])
    return record


def fingerprint(path: str | Path) -> str:
    """Cheap content key of a shard: its size and Parquet footer (which holds every page offset)."""
    path = Path(path)
    size = path.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with path.open("rb") as handle:
        handle.seek(max(0, size - 65536))
        digest.update(handle.read())
    return digest.hexdigest()[:16]
