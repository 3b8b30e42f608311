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


class FilePathDataset(AbstractDataset[None, Path]):
    """A file a node reads by path, not by bytes: a KenLM binary (memory-mapped, possibly gigabytes) or a
    lexicon handed to a C++ decoder. ``load`` checks it exists; another entry (``BinaryFileDataset``,
    ``text.TextDataset``) saves it."""

    def __init__(self, filepath: str, made_by: str = "") -> None:
        self._filepath = Path(filepath)
        self._made_by = made_by

    def load(self) -> Path:
        if not self._filepath.is_file():
            hint = (
                f"; it is written by the `{self._made_by}` stage (`dvc repro {self._made_by}`)"
                if self._made_by
                else ""
            )
            raise DatasetError(f"{self._filepath} does not exist{hint}")
        return _project_relative(self._filepath)

    def save(self, data: None) -> None:
        raise DatasetError(f"{self._filepath} is read by path here; its own catalog entry saves it")

    def _exists(self) -> bool:
        return self._filepath.is_file()

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath)}


@dataclass(frozen=True)
class Manifest:
    """A manifest file or folder, read lazily so large manifests stream. ``corpus``: the folder its audio and
    feature files must lie in (``paths.corpus``; the transcripts stage skips and counts the others); None
    outside the pipeline (``asr-pipeline extract-features``), where no folder is tracked. ``path`` None: an
    optional split the corpus does not have (``paths.raw_test_open: null``), which has no records."""

    path: Path | None
    corpus: Path | None = None

    def records(self, report: SkipReport) -> Iterator[ManifestRecord]:
        return iter(()) if self.path is None else iter_manifest(self.path, report)


class ManifestDataset(AbstractDataset[Any, Manifest]):
    """A raw manifest (JSONL/JSON/TSV/Parquet file, audio folder or corpus tree): an input, never written.

    A user's corpus is a DVC-tracked input, so no stage may write to it (DVC would also delete a stage's
    outputs before rerunning it). ``corpus`` is the folder DVC tracks as the stages' input
    (``paths.corpus``); a manifest outside it is refused, since DVC would not notice it change.

    ``setting`` names the conf/base/globals.yml key of ``path`` for messages. ``optional``: a split a corpus
    may lack (the open test set): ``path`` null loads a manifest without records, so the split's stages still
    run, write an empty split and report 0 utterances.
    """

    def __init__(
        self, path: str | None, corpus: str | None = None, setting: str = "", optional: bool = False
    ) -> None:
        self._path = None if path is None else Path(path)
        self._corpus = None if corpus is None else Path(corpus)
        self._setting, self._optional = setting, optional

    def load(self) -> Manifest:
        if self._path is None:
            if self._optional:
                return Manifest(None)
            raise DatasetError(
                f"{self._setting or 'the manifest path'} is null in conf/base/globals.yml: the train, dev "
                "and test splits are required; point it at the split's manifest"
            )
        if not self._path.exists():
            raise DatasetError(
                f"manifest {self._path} does not exist. For the demo corpus, run `dvc repro demo_corpus` "
                "(or `kedro run --pipelines=demo_corpus`) first; for your own data, point paths.corpus and "
                "paths.raw_train/raw_dev/raw_test in conf/base/globals.yml at it (README: Train on your own data)"
                + (f"; {self._setting}: null when your corpus has no such split" if self._optional else "")
            )
        if self._corpus is not None and not _is_within(self._path, self._corpus):
            raise DatasetError(
                f"manifest {self._path} lies outside paths.corpus={self._corpus} (conf/base/globals.yml): the "
                "stages depend on paths.corpus, so DVC would not see this manifest or its audio change. Move "
                "the data under paths.corpus or point paths.corpus at a folder that holds it"
                + (
                    f" (or set {self._setting}: null if your corpus has no such split)"
                    if self._optional
                    else ""
                )
            )
        corpus = None if self._corpus is None else _project_relative(self._corpus)
        return Manifest(_project_relative(self._path), corpus)

    def save(self, data: Any) -> None:
        raise DatasetError(
            f"refusing to write to the raw manifest {self._path}: a corpus is an input (dvc add), never a "
            "stage output; the demo corpus is written through demo_corpus_files (paths.demo)"
        )

    def _exists(self) -> bool:
        return self._optional if self._path is None else self._path.exists()

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path), "corpus": str(self._corpus), "optional": self._optional}


class DemoCorpusDataset(AbstractDataset[Mapping[str, bytes | Callable[[], bytes]], None]):
    """The generated demo corpus: ``save`` writes {path relative to the folder: bytes (or a callable
    returning bytes)} under its own folder (``paths.demo``) and nothing else.

    A marker file says the folder is the demo's; a save replaces everything in such a folder. A folder that
    holds files but no marker is someone's data (``paths.demo`` pointed at a corpus by mistake): saving there
    is refused rather than mixing the demo into it or replacing its manifests. (dvc.yaml marks the folder
    ``persist: true`` so that DVC leaves it to this check instead of deleting it before the stage runs.)
    """

    MARKER = ".demo_corpus"

    def __init__(self, path: str, stage: str = "demo_corpus", setting: str = "paths.demo") -> None:
        self._path = Path(path)
        self._stage, self._setting = stage, setting  # the stage that writes it and the path setting naming it

    def load(self) -> None:
        raise DatasetError(f"the {self._stage} folder {self._path} is read through its reader's entries")

    def save(self, data: Mapping[str, bytes | Callable[[], bytes]]) -> None:
        root = self._path
        if root.is_dir() and any(root.iterdir()) and not (root / self.MARKER).is_file():
            raise DatasetError(
                f"{root} holds files the {self._stage} stage did not write (no {self.MARKER} marker): refusing "
                f"to write into it. {self._setting} in conf/base/globals.yml must name a folder only the "
                f"{self._stage} stage writes; your own corpus goes in paths.corpus"
            )
        if (
            root.is_dir()
        ):  # the demo's own folder: rebuilt from scratch, so no file of an earlier build lingers
            for child in root.iterdir():
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
        root.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(
            root / self.MARKER, f"written by the {self._stage} stage; safe to delete and rebuild\n".encode()
        )
        for relative, content in data.items():
            target = (root / relative).resolve()
            if not _is_within(target, root):
                raise DatasetError(f"refusing to write {relative!r} outside {root}")
            write_bytes_atomic(target, content() if callable(content) else content)

    def _exists(self) -> bool:
        return (self._path / self.MARKER).is_file()

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path)}


class TrainedRunDataset(AbstractDataset[Path, Path]):
    """A finished training run: the run dir, which loads only once its checkpoint pointer (``marker``,
    written last and atomically by training) exists. The train node saves it after training, so a stage
    that loads it waits for a real checkpoint rather than for a placeholder."""

    def __init__(self, path: str, marker: str) -> None:
        self._path = Path(path)
        self._marker = marker

    def load(self) -> Path:
        if not (self._path / self._marker).is_file():
            raise DatasetError(
                f"no trained model in {self._path}: {self._marker} is missing. Train first: "
                "`dvc repro train` or `kedro run --pipelines=train`"
            )
        return _project_relative(self._path)

    def save(self, data: Path) -> None:
        if Path(data).resolve() != self._path.resolve():
            raise DatasetError(f"trained run saved as {data}, but this entry is {self._path}")
        if not (self._path / self._marker).is_file():
            raise DatasetError(f"training ended without writing {self._path / self._marker}")

    def _exists(self) -> bool:
        return (self._path / self._marker).is_file()

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path), "marker": self._marker}


def _is_within(path: Path, folder: Path) -> bool:
    path, folder = path.resolve(), folder.resolve()
    return path == folder or folder in path.parents


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
