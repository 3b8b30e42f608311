"""``--manifest-dir DIR``: find the train and validation manifests in a folder, or split train off itself.

``DIR/train.jsonl`` is the training manifest; validation is the first of ``val.jsonl``, ``validation.jsonl``,
``dev.jsonl`` found there. With none of them, about ``VAL_PERCENT``% of the training records go to
validation, chosen by a hash of the record id (not by position or a random draw), so the split does not
depend on record order, is the same on every machine, and a record never changes side when others are
added. The two halves are written under ``<output_dir>/manifest_split/`` as JSONL, relative paths
re-anchored so they still point at the same files, with a fingerprint of the source: a rerun reuses the
same files byte for byte, and a changed ``train.jsonl`` is split again.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from asr_pipeline.io.atomic import write_bytes_atomic
from asr_pipeline.io.manifests import AUDIO_FIELDS, ID_FIELDS, UTF8_BOM

TRAIN_NAME = "train.jsonl"
VAL_NAMES = ("val.jsonl", "validation.jsonl", "dev.jsonl")
VAL_PERCENT = 10
SPLIT_FOLDER = "manifest_split"
FINGERPRINT_NAME = "split.json"
# Fields holding paths relative to the manifest's folder (io/manifests.py resolves them that way).
PATH_FIELDS = (*AUDIO_FIELDS, "features_path")
# Bump when the split rule changes, so splits written by an older rule are not reused.
SPLIT_VERSION = 1


@dataclass(frozen=True)
class ManifestSplit:
    train: Path
    val: Path | None  # None only when the training manifest has a single record
    generated: bool  # True: both files were split off DIR/train.jsonl under the output dir


def resolve_manifest_dir(directory: str | Path, output_dir: str | Path) -> ManifestSplit:
    """The train and validation manifests of ``directory`` (see the module docstring).

    Raises FileNotFoundError naming what was looked for when ``directory`` or its ``train.jsonl`` is missing.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"--manifest-dir {directory}: no such folder")
    train = directory / TRAIN_NAME
    if not train.is_file():
        present = sorted(p.name for p in directory.glob("*.jsonl"))
        raise FileNotFoundError(
            f"--manifest-dir {directory}: no {TRAIN_NAME} (found {present or 'no .jsonl files'}); "
            f"name the training manifest {TRAIN_NAME}, or pass the manifests one by one"
        )
    for name in VAL_NAMES:
        if (directory / name).is_file():
            return ManifestSplit(train=train, val=directory / name, generated=False)
    return _split_off_validation(train, Path(output_dir) / SPLIT_FOLDER)


def _split_off_validation(train: Path, folder: Path) -> ManifestSplit:
    fingerprint = {
        "source": str(train),
        "sha256": _file_sha256(train),
        "val_percent": VAL_PERCENT,
        "version": SPLIT_VERSION,
    }
    train_out, val_out, stamp = folder / TRAIN_NAME, folder / "val.jsonl", folder / FINGERPRINT_NAME
    if stamp.is_file() and train_out.is_file():
        try:
            if json.loads(stamp.read_text(encoding="utf-8")) == fingerprint:
                return ManifestSplit(train_out, val_out if val_out.is_file() else None, generated=True)
        except json.JSONDecodeError:
            pass  # a damaged stamp: split again
    # Two streaming passes (decide, then write) keep memory flat for large manifests: one bool per line.
    to_val: list[bool] = []
    lowest: tuple[int, int] | None = None  # (hash, index) of the record with the lowest hash
    parsed = 0
    for index, (_, record_id) in enumerate(_iter_records(train)):
        if record_id is None:
            to_val.append(False)  # not a JSON object: left to the reader (in the training half) to report
            continue
        parsed += 1
        digest = _hash(record_id)
        to_val.append(digest < VAL_PERCENT * 2**64 // 100)
        lowest = min(lowest, (digest, index)) if lowest is not None else (digest, index)
    if not any(to_val) and lowest is not None and parsed > 1:
        to_val[lowest[1]] = True  # too few records for the hash to pick any: the lowest hash, order-free
    folder.mkdir(parents=True, exist_ok=True)
    for stale in (stamp, val_out):
        stale.unlink(missing_ok=True)
    with (
        (folder / (TRAIN_NAME + ".tmp")).open("wb") as train_file,
        (folder / "val.jsonl.tmp").open("wb") as val_file,
    ):
        for (line, _), is_val in zip(_iter_records(train), to_val, strict=True):
            (val_file if is_val else train_file).write(_reanchor(line, train.parent, folder) + b"\n")
    os.replace(folder / (TRAIN_NAME + ".tmp"), train_out)
    if any(to_val):
        os.replace(folder / "val.jsonl.tmp", val_out)
    else:
        (folder / "val.jsonl.tmp").unlink()  # a single record: train on it, no validation
    # The stamp last: an interrupted split is redone, never reused half-written.
    write_bytes_atomic(stamp, (json.dumps(fingerprint, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    return ManifestSplit(train_out, val_out if any(to_val) else None, generated=True)


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _iter_records(path: Path) -> Iterator[tuple[bytes | dict, str | None]]:
    """(parsed object, or the raw line, and the record id or None) of each non-blank line, streamed.

    Ids are the reader's (io/manifests.py): the id field, else the audio/features file stem, else
    ``<stem>-<line>``. A line that is not a JSON object in UTF-8 is carried over byte for byte.
    """
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if number == 1 and raw.startswith(UTF8_BOM):
                raw = raw[len(UTF8_BOM) :]
            line = raw.rstrip(b"\r\n")
            if not line.strip():
                continue
            try:
                obj = json.loads(line.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                obj = None
            if not isinstance(obj, dict):
                yield line, None
                continue
            record_id = next((obj[f] for f in ID_FIELDS if obj.get(f) is not None), None)
            if record_id is None:
                name = next((obj[f] for f in PATH_FIELDS if obj.get(f) is not None), None)
                record_id = Path(str(name)).stem if name is not None else f"{path.stem}-{number:06d}"
                obj = {"id": str(record_id), **obj}  # keep the reader's id although the line moves
            yield obj, str(record_id)


def _hash(record_id: str) -> int:
    return int.from_bytes(hashlib.sha256(record_id.encode("utf-8")).digest()[:8], "big")


def _reanchor(record: bytes | dict, source_folder: Path, target_folder: Path) -> bytes:
    """The record as a JSONL line whose relative paths resolve from ``target_folder`` to the same files."""
    if isinstance(record, bytes):
        return record
    moved = dict(record)
    for name in PATH_FIELDS:
        value = moved.get(name)
        if isinstance(value, str) and not Path(value).is_absolute():
            moved[name] = os.path.relpath(source_folder / value, target_folder)
    return json.dumps(moved, ensure_ascii=False).encode("utf-8")
