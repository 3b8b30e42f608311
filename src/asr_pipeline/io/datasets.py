"""Kedro datasets for what the stock ones do not cover: raw bytes, manifests, shard folders, run dirs.

The catalog owns every path; nodes see bytes, record streams, shard lists or a run directory.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from kedro.io import AbstractDataset, DatasetError

from asr_pipeline.io import shards
from asr_pipeline.io.atomic import write_bytes_atomic
from asr_pipeline.io.manifests import ManifestRecord, iter_manifest
from asr_pipeline.io.report import SkipReport


def _project_relative(path: Path) -> Path:
    """``path`` relative to the working directory (the project root) when it lies inside it.

    Kedro makes catalog ``path``s absolute; paths that end up inside artifacts (shard lists in the length
    index, audio paths in manifests, the training config) must not, or a teammate's clone at another
    location would produce different bytes for the same stage.
    """
    absolute = path.resolve()
    try:
        return absolute.relative_to(Path.cwd().resolve())
    except ValueError:
        return absolute


class BinaryFileDataset(AbstractDataset[bytes, bytes]):
    """A file's raw bytes (a SentencePiece model, a KenLM binary)."""

    def __init__(self, filepath: str) -> None:
        self._filepath = Path(filepath)

    def load(self) -> bytes:
        return self._filepath.read_bytes()

    def save(self, data: bytes) -> None:
        write_bytes_atomic(self._filepath, bytes(data))

    def _exists(self) -> bool:
        return self._filepath.is_file()

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath)}


@dataclass(frozen=True)
class Manifest:
    """A manifest file or folder, read lazily so large manifests stream."""

    path: Path

    def records(self, report: SkipReport) -> Iterator[ManifestRecord]:
        return iter_manifest(self.path, report)


class ManifestDataset(AbstractDataset[Mapping[str, bytes | Callable[[], bytes]], Manifest]):
    """A raw manifest (JSONL/JSON file or audio folder).

    ``save`` takes {relative path: bytes or a callable returning bytes} and writes each file relative to
    the manifest's folder (the folder itself for an audio folder), so a generator such as the demo
    corpus writes a manifest together with the audio it references.
    """

    def __init__(self, path: str) -> None:
        self._path = Path(path)

    def load(self) -> Manifest:
        if not self._path.exists():
            raise DatasetError(
                f"manifest {self._path} does not exist: point the catalog at your data "
                "or run the demo_corpus stage first"
            )
        return Manifest(_project_relative(self._path))

    def save(self, data: Mapping[str, bytes | Callable[[], bytes]]) -> None:
        root = self._path if not self._path.suffix else self._path.parent
        for relative, content in data.items():
            target = (root / relative).resolve()
            if root.resolve() not in target.parents:
                raise DatasetError(f"refusing to write {relative!r} outside {root}")
            write_bytes_atomic(target, content() if callable(content) else content)
        if not self._path.exists():
            raise DatasetError(f"saved files did not include the manifest {self._path} itself")

    def _exists(self) -> bool:
        return self._path.exists()

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path)}


@dataclass(frozen=True)
class ShardChunk:
    """One shard of a split, as yielded by a streaming (generator) extraction node."""

    index: int
    table: pa.Table


class FeatureShardsDataset(AbstractDataset[ShardChunk, list[str]]):
    """A folder of numbered Parquet feature shards (see io/shards.py for the columns).

    Saved one ``ShardChunk`` at a time (Kedro streams generator nodes chunk by chunk). Chunk 0 removes
    shards left by an earlier run; each shard is written atomically, so an interrupted run never leaves
    a complete-looking partial shard. ``load`` returns the shard paths in order.
    """

    def __init__(self, path: str) -> None:
        self._path = Path(path)

    def load(self) -> list[str]:
        found = shards.list_shards(self._path)
        if not found:
            raise DatasetError(f"no feature shards ({shards.SHARD_GLOB}) in {self._path}")
        return [str(_project_relative(p)) for p in found]

    def save(self, data: ShardChunk) -> None:
        self._path.mkdir(parents=True, exist_ok=True)
        if data.index == 0:
            for stale in [*shards.list_shards(self._path), *self._path.glob("*.tmp")]:
                stale.unlink()
        shards.write_shard(data.table, self._path / shards.shard_name(data.index))

    def _exists(self) -> bool:
        return bool(shards.list_shards(self._path))

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path)}


class DirectoryDataset(AbstractDataset[None, Path]):
    """A working directory a node writes into itself (a training run). ``load`` creates it empty-safe."""

    def __init__(self, path: str) -> None:
        self._path = Path(path)

    def load(self) -> Path:
        self._path.mkdir(parents=True, exist_ok=True)
        return _project_relative(self._path)

    def save(self, data: None) -> None:
        raise DatasetError(f"{self._path} is written by the node that loads it, not saved")

    def clear(self) -> None:
        shutil.rmtree(self._path, ignore_errors=True)

    def _exists(self) -> bool:
        return self._path.is_dir()

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path)}
