"""Length index: one small row per example, so samplers can plan batches without touching features.

Columns (one row per shard row, in shard order then row order)::

    shard              string  the shard path exactly as given to ``build_length_index``
    shard_fingerprint  string  ``io.shards.fingerprint`` of that shard when the index was built
    row                int32   row number inside the shard
    rows               int32   number of frames T
    cols               int32   feature dimension F
    tokens             int32   number of target tokens U
    duration_ms        int32   audio duration

The fingerprint makes staleness checkable: a re-extracted shard gets a new footer and therefore a new
fingerprint, and ``index_is_current`` then says no. A stale index is rebuilt, never used: batches planned
from wrong lengths would silently blow the padded-frames budget (or address rows that no longer exist).

Shards are matched by their path *string*, so an index built from ``data/05/shard-00000.parquet`` is not
current for ``/abs/data/05/shard-00000.parquet``; that costs a rebuild, never a wrong answer.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from asr_pipeline.io.shards import fingerprint

logger = logging.getLogger(__name__)

LENGTH_INDEX_SCHEMA = pa.schema(
    [
        ("shard", pa.string()),
        ("shard_fingerprint", pa.string()),
        ("row", pa.int32()),
        ("rows", pa.int32()),
        ("cols", pa.int32()),
        ("tokens", pa.int32()),
        ("duration_ms", pa.int32()),
    ]
)
# The only shard columns the index reads. ``features`` (F floats per frame, against a few tokens per
# utterance) is nearly all of a shard's bytes and is never read here.
_SHARD_COLUMNS = ["rows", "cols", "tokens", "duration_ms"]


def build_length_index(shard_paths: Sequence[str | Path]) -> pa.Table:
    """Read the length columns of every shard (never ``features``) into one index table."""
    tables = [_index_one_shard(path) for path in shard_paths]
    if not tables:
        return LENGTH_INDEX_SCHEMA.empty_table()
    return pa.concat_tables(tables)


def _index_one_shard(path: str | Path) -> pa.Table:
    meta = pq.read_table(path, columns=_SHARD_COLUMNS)
    num_rows = meta.num_rows
    token_counts = pc.fill_null(pc.list_value_length(meta.column("tokens")), 0)
    return pa.Table.from_arrays(
        [
            pa.array([str(path)] * num_rows, pa.string()),
            pa.array([fingerprint(path)] * num_rows, pa.string()),
            pa.array(np.arange(num_rows, dtype=np.int32), pa.int32()),
            meta.column("rows").cast(pa.int32()),
            meta.column("cols").cast(pa.int32()),
            token_counts.cast(pa.int32()),
            meta.column("duration_ms").cast(pa.int32()),
        ],
        schema=LENGTH_INDEX_SCHEMA,
    )


def index_is_current(index: pa.Table, shard_paths: Sequence[str | Path]) -> bool:
    """True when ``index`` covers exactly ``shard_paths``, each with its current fingerprint.

    Any missing shard, changed shard, extra shard or missing file makes the index stale. A shard with no
    rows has no index rows; it counts as covered when it is still empty (read from its footer).
    """
    if set(index.column_names) != set(LENGTH_INDEX_SCHEMA.names):
        return False
    indexed = _fingerprints_by_shard(index)
    wanted = [str(path) for path in shard_paths]
    if set(indexed) - set(wanted):
        return False
    for path in wanted:
        if not Path(path).is_file():
            return False
        if path in indexed:
            if indexed[path] != {fingerprint(path)}:
                return False
        elif pq.ParquetFile(path).metadata.num_rows != 0:
            return False
    return True


def _fingerprints_by_shard(index: pa.Table) -> dict[str, set[str]]:
    pairs = (
        index.select(["shard", "shard_fingerprint"]).group_by(["shard", "shard_fingerprint"]).aggregate([])
    )
    found: dict[str, set[str]] = {}
    for shard, print_ in zip(
        pairs.column("shard").to_pylist(), pairs.column("shard_fingerprint").to_pylist(), strict=True
    ):
        found.setdefault(shard, set()).add(print_)
    return found


def load_length_index(shard_paths: Sequence[str | Path], index_path: str | Path | None = None) -> pa.Table:
    """The index rows of ``shard_paths``, taken from ``index_path`` when it is current, else rebuilt.

    ``index_path`` may cover more shards than asked for (one index for every split); only the rows of
    ``shard_paths`` are kept, in the order of ``shard_paths``. The rebuilt index is not written back:
    the file belongs to the ``index`` stage and DVC, not to whoever reads it.
    """
    wanted = [str(path) for path in shard_paths]
    if index_path is None:
        return build_length_index(wanted)
    current = _current_rows(Path(index_path), wanted)
    if current is not None:
        return current
    logger.warning(
        "length index %s is missing or stale for these %d shards; rebuilding it in memory",
        index_path,
        len(wanted),
    )
    return build_length_index(wanted)


def cached_length_index(
    shard_paths: Sequence[str | Path], cache_dir: str | Path, *, write: bool = True
) -> pa.Table:
    """``load_length_index`` through a cache folder (``--dataset-index-dir``): one file per shard list.

    The file is named by a hash of the shard paths, so several datasets can share one folder. A current
    file is used as is; a missing or stale one (a shard re-extracted since: its fingerprint changed) is
    rebuilt and, with ``write``, replaced atomically (a per-process temporary name, then a rename, so
    ranks or jobs writing the same index never expose half a file). DDP callers let one process per
    machine write.
    """
    wanted = [str(path) for path in shard_paths]
    digest = hashlib.sha256("\n".join(wanted).encode()).hexdigest()[:16]
    path = Path(cache_dir) / f"length_index-{digest}.parquet"
    current = _current_rows(path, wanted)
    if current is not None:
        return current
    index = build_length_index(wanted)
    if write:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        pq.write_table(index, tmp)
        os.replace(tmp, path)
        logger.info("length index cached at %s", path)
    return index


def _current_rows(index_path: Path, wanted: list[str]) -> pa.Table | None:
    """The rows of ``wanted`` in the index file, in shard order, if the file exists and is current."""
    if not index_path.is_file():
        return None
    stored = pq.read_table(index_path)
    if not set(LENGTH_INDEX_SCHEMA.names) <= set(stored.column_names):
        return None
    stored = stored.select(LENGTH_INDEX_SCHEMA.names).cast(LENGTH_INDEX_SCHEMA)
    subset = stored.filter(pc.is_in(stored.column("shard"), pa.array(wanted, pa.string())))
    return _in_shard_order(subset, wanted) if index_is_current(subset, wanted) else None


def _in_shard_order(index: pa.Table, shard_paths: list[str]) -> pa.Table:
    position = {path: i for i, path in enumerate(shard_paths)}
    shard_rank = np.array([position[s] for s in index.column("shard").to_pylist()], dtype=np.int64)
    rows = index.column("row").to_numpy()
    return index.take(np.lexsort((rows, shard_rank)))


__all__ = [
    "LENGTH_INDEX_SCHEMA",
    "build_length_index",
    "cached_length_index",
    "index_is_current",
    "load_length_index",
]
