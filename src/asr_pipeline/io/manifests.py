"""Manifest readers, streamed: one entry point, ``iter_manifest``, for every input form.

Forms (each reader's module docstring has the details):

* files: JSONL/JSON records (here), TSV feature lists, audio lists and Common Voice tables (``io.tsv``),
  Parquet tables and Arrow IPC files (Hugging Face ``datasets`` shards; ``io.parquet``);
* folders: a Kaldi data dir (``wav.scp``, ``io.kaldi``); a ``datasets`` ``save_to_disk`` folder (its Arrow
  shards in ``state.json``'s order); else the record files directly inside (``.jsonl``, ``.json``,
  ``.parquet``, ``.arrow``, ``.tsv``, sorted by name); else a LibriSpeech tree (``*.trans.txt`` below) or an
  audio folder with sidecars (``io.folders``).

Every reader yields ``ManifestRecord``s (``io.records``) whose ``location`` names the file and line
(``file:12``), JSON array record (``file:record 3``), Parquet row (``file.parquet:row 0``, counted from 0
as in pyarrow/pandas) or audio file, so a bad record can be reported precisely; bad ones are counted in
the ``SkipReport`` (or, in strict mode, raise ``InputError``) under a reason naming what was wrong.
Relative paths resolve against the manifest's folder (the data dir for Kaldi, the TSV's folder or its
``clips/`` for TSV). Field names and aliases follow the reference Rust trainer (issue 3). Plain-text
``.txt`` files hold tokenizer text, not records: read them with ``iter_text_lines``.

Record kinds (``ManifestRecord.kind``), in the order a record carrying several is taken as: inline features
(``features_inline``), a feature file (``features_file``), embedded audio bytes (``audio_bytes``), an audio
file (``audio_file``). Inline feature values are only materialized on request (``inline_features=True``):
the transcripts stage checks their shape without holding them, the features stage re-reads them.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from asr_pipeline.io.audio import EMPTY_PATH
from asr_pipeline.io.folders import iter_folder
from asr_pipeline.io.kaldi import is_kaldi_data_dir, iter_kaldi_data_dir
from asr_pipeline.io.parquet import (
    is_saved_dataset,
    iter_arrow_records,
    iter_parquet_records,
    iter_saved_dataset,
)
from asr_pipeline.io.records import (
    AUDIO_FIELDS,
    ID_FIELDS,
    TEXT_FIELDS,
    TOKEN_FIELDS,
    UTF8_BOM,
    DefaultIds,
    ManifestRecord,
    check_text,
    first_field,
    iter_decoded_lines,
    parse_dimension,
    parse_tokens,
)
from asr_pipeline.io.report import InputError, SkipReport
from asr_pipeline.io.tsv import iter_tsv_records

if TYPE_CHECKING:
    import numpy as np

# Re-exported: callers import the record type, aliases and token parsing from here.
__all__ = [
    "AUDIO_FIELDS",
    "ID_FIELDS",
    "RECORD_FILE_SUFFIXES",
    "TEXT_FIELDS",
    "TOKEN_FIELDS",
    "UTF8_BOM",
    "ManifestRecord",
    "iter_manifest",
    "iter_text_lines",
    "parse_tokens",
]

RECORD_FILE_SUFFIXES = (".jsonl", ".json", ".parquet", ".arrow", ".tsv")
T = TypeVar("T")


def iter_manifest(
    path: str | Path, report: SkipReport, inline_features: bool = False
) -> Iterator[ManifestRecord]:
    """Stream the records of a manifest file or folder (module docstring); malformed ones go to ``report``.

    With ``inline_features`` the records carry their inline feature values as a (rows, cols) float32 array.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if path.is_dir():
        yield from _iter_folder_manifest(path, report, inline_features)
    elif not path.exists():
        raise FileNotFoundError(f"manifest not found: {path}")
    elif suffix in (".jsonl", ".json"):
        yield from _iter_json_records(path, report, inline_features)
    elif suffix == ".tsv":
        yield from iter_tsv_records(path, report)
    elif suffix == ".parquet":
        yield from iter_parquet_records(path, report, inline_features)
    elif suffix == ".arrow":
        yield from iter_arrow_records(path, report, inline_features)
    elif suffix == ".txt":
        raise ValueError(
            f"{path}: a .txt file holds tokenizer text, not manifest records; point the manifest at a "
            f"folder or one of {RECORD_FILE_SUFFIXES} (iter_text_lines reads .txt for the tokenizer)"
        )
    else:
        raise ValueError(
            f"{path}: unsupported manifest type {path.suffix!r}; "
            f"expected a folder or one of {RECORD_FILE_SUFFIXES}"
        )


def _iter_folder_manifest(
    folder: Path, report: SkipReport, inline_features: bool
) -> Iterator[ManifestRecord]:
    if is_kaldi_data_dir(folder):
        yield from iter_kaldi_data_dir(folder, report)
        return
    if is_saved_dataset(folder):  # its state.json and dataset_info.json are no records
        yield from iter_saved_dataset(folder, report, inline_features)
        return
    record_files = sorted(
        p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in RECORD_FILE_SUFFIXES
    )
    for record_file in record_files:
        yield from iter_manifest(record_file, report, inline_features)
    if not record_files:
        yield from iter_folder(folder, report)


def iter_text_lines(path: str | Path, report: SkipReport) -> Iterator[tuple[str, str]]:
    """Stream ``(location, line)`` for the non-empty lines of a plain-text file (tokenizer training text),
    stripped; ``location`` is ``file:line``. A BOM and CRLF endings are tolerated; a line that is not
    valid UTF-8 is skipped and counted.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"text file not found: {path}")
    for number, line in iter_decoded_lines(path, report):
        report.seen += 1
        yield f"{path}:{number}", line.strip()


# --- JSON ------------------------------------------------------------------------------------------------


def _iter_json_records(path: Path, report: SkipReport, inline_features: bool) -> Iterator[ManifestRecord]:
    reader = _JsonRecords(path, report, inline_features)
    with path.open("rb") as handle:
        is_array = path.suffix.lower() == ".json" and handle.read(len(UTF8_BOM) + 64).lstrip(
            UTF8_BOM + b" \t\r\n"
        ).startswith(b"[")
    if is_array:
        # A JSON array cannot be streamed with the standard library; use JSONL for large manifests.
        with path.open(encoding="utf-8-sig") as handle:
            try:
                objects = json.load(handle)
            except (json.JSONDecodeError, UnicodeDecodeError) as error:
                raise InputError(
                    f"{path}: not a valid JSON array ({error}); fix it or convert to JSONL"
                ) from None
        for number, obj in enumerate(objects, start=1):
            record = reader.record(obj, f"{path}:record {number}", number)
            if record is not None:
                yield record
        return
    for number, line in iter_decoded_lines(path, report):
        location = f"{path}:{number}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as error:
            report.seen += 1
            report.skip("malformed JSON", location, str(error))
            continue
        record = reader.record(obj, location, number)
        if record is not None:
            yield record


class _JsonRecords:
    """Records from the JSON objects of one file; ids derived from file names stay unique in it."""

    def __init__(self, path: Path, report: SkipReport, inline_features: bool) -> None:
        self.path, self.report, self.inline_features = path, report, inline_features
        self.ids = DefaultIds()

    def record(self, obj: object, location: str, number: int) -> ManifestRecord | None:
        """The record of one object, or None when it was counted as a skip (strict mode: raised)."""
        self.report.seen += 1
        try:
            return self._parse(obj, location, number)
        except _Skip as skip:
            self.report.skip(skip.reason, location, skip.detail)
            return None

    def _parse(self, obj: object, location: str, number: int) -> ManifestRecord:
        if not isinstance(obj, dict):
            raise _Skip("record is not a JSON object")
        _, utt_id = first_field(obj, ID_FIELDS)
        _, audio = first_field(obj, AUDIO_FIELDS)
        text_field, given_text = first_field(obj, TEXT_FIELDS)
        _, tokens = first_field(obj, TOKEN_FIELDS)
        features_path = obj.get("features_path")
        parsed_tokens = _checked(
            "invalid tokens", lambda: parse_tokens(tokens) if tokens is not None else None
        )
        rows = _checked("invalid rows/cols", lambda: parse_dimension(obj.get("rows"), "rows"))
        cols = _checked("invalid rows/cols", lambda: parse_dimension(obj.get("cols"), "cols"))
        text = _checked("invalid text", lambda: check_text(given_text, text_field or "text"))
        features = obj.get("features")
        if features is not None:
            try:
                rows, cols = _inline_feature_shape(features, rows, cols)
            except ValueError as error:
                raise _Skip(str(error).split(":")[0], str(error)) from None
        for field, value in (("features_path", features_path), ("audio_path", audio)):
            if value is not None and not isinstance(value, str):
                raise _Skip(f"invalid {field}", f"expected a string, got {value!r:.80}")
            if value == "":  # else it would name the manifest's own folder
                raise _Skip(EMPTY_PATH, f'{field} is "": name a file, or leave the field out')
        name_source = audio if audio is not None else features_path
        if utt_id is None:
            utt_id = (
                self.ids.for_file(os.path.normpath(name_source))
                if name_source is not None
                else f"{self.path.stem}-{number:06d}"
            )
        folder = self.path.parent
        return ManifestRecord(
            id=str(utt_id),
            location=location,
            audio_path=str(folder / audio) if audio is not None else None,
            text=text,
            tokens=parsed_tokens,
            features_path=str(folder / features_path) if features_path is not None else None,
            rows=rows,
            cols=cols,
            has_inline_features=features is not None,
            features=_as_array(features, rows, cols)
            if self.inline_features and features is not None
            else None,
            source=str(self.path),
        )


class _Skip(Exception):
    """A JSON object that cannot become a record: the skip reason and what was wrong."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.reason, self.detail = reason, detail


def _checked(reason: str, parse: Callable[[], T]) -> T:
    """``parse()``, its ValueError turned into a ``_Skip`` for ``reason``."""
    try:
        return parse()
    except ValueError as error:
        raise _Skip(reason, str(error)) from None


def _as_array(values: object, rows: int | None, cols: int | None) -> np.ndarray:
    """Checked inline features (a 2-D or flat list of numbers) as a (rows, cols) float32 array."""
    import numpy as np

    assert rows is not None and cols is not None  # set by _inline_feature_shape
    return np.asarray(values, dtype=np.float32).reshape(rows, cols)


def _inline_feature_shape(features: object, rows: int | None, cols: int | None) -> tuple[int, int]:
    """(rows, cols) of inline features: a 2-D list, or a flat list with rows and cols given.

    Raises ValueError whose text starts with the skip reason, then ": " and what was expected.
    """
    if not isinstance(features, list) or not features:
        raise ValueError("invalid features: expected a non-empty list of numbers or of lists of numbers")
    if isinstance(features[0], list):
        widths = {len(row) if isinstance(row, list) else -1 for row in features}
        if len(widths) != 1 or -1 in widths:
            raise ValueError("ragged features: every frame of a 2-D features list needs the same length")
        shape = (len(features), widths.pop())
        values = (value for row in features for value in row)
        if (rows is not None and rows != shape[0]) or (cols is not None and cols != shape[1]):
            raise ValueError(f"rows*cols does not match: rows={rows} cols={cols} but features are {shape}")
    else:
        if rows is None or cols is None:
            raise ValueError("invalid features: a flat features list needs rows and cols")
        if rows * cols != len(features):
            raise ValueError(
                f"rows*cols does not match: rows={rows} * cols={cols} = {rows * cols}, "
                f"but features has {len(features)} values"
            )
        shape = (rows, cols)
        values = iter(features)
    finite = True
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"non-numeric features: every feature value must be a number, got {value!r:.40}")
        # Python's json accepts NaN and Infinity; one of them poisons every gradient of a batch.
        finite = finite and math.isfinite(value)
    if not finite:
        raise ValueError("NaN/Inf features: every feature value must be a finite number")
    return shape
