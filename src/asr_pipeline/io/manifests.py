"""Manifest readers, streamed: JSONL/JSON records, TSV feature lists, Parquet tables, audio folders.

Every reader yields ``ManifestRecord``s whose ``location`` names the file and line (``file:12``), JSON array
record (``file:record 3``) or Parquet row (``file.parquet:row 0``, counted from 0 as in pyarrow/pandas), so
a bad record can be reported precisely. Relative paths resolve against the manifest's folder. Field names
and aliases follow the reference Rust trainer (issue 3). Plain-text ``.txt`` files hold tokenizer text, not
records: read them with ``iter_text_lines``.

Record kinds (``ManifestRecord.kind``), in the order a record carrying several is taken as: inline features
(``features_inline``), a feature file (``features_file``), embedded audio bytes (``audio_bytes``), an audio
file (``audio_file``). Inline feature values are only materialized on request (``inline_features=True``):
the transcripts stage checks their shape without holding them, the features stage re-reads them.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from asr_pipeline.io.audio import AUDIO_EXTENSIONS
from asr_pipeline.io.report import InputError, SkipReport

if TYPE_CHECKING:
    import numpy as np

TEXT_FIELDS = ("text", "transcript", "transcription", "sentence", "normalized_text")
TOKEN_FIELDS = ("tokens", "target", "targets")
ID_FIELDS = ("id", "utt_id", "utterance_id", "key", "sample_id")
AUDIO_FIELDS = ("audio_path", "path", "file", "file_path")
# Parquet only (issue 3): Hugging Face datasets name token ids `labels`, and carry audio inline.
PARQUET_TOKEN_FIELDS = (*TOKEN_FIELDS, "labels", "label_ids")
PARQUET_FEATURE_FIELDS = ("features", "input_features", "feature", "fbank", "filterbank")
PARQUET_ROWS_FIELDS = ("rows", "num_frames", "frames", "feature_rows")
PARQUET_COLS_FIELDS = ("cols", "feature_dim", "num_features")
PARQUET_AUDIO_BYTES_FIELDS = ("audio_bytes", "bytes", "wav", "audio_data")
HF_AUDIO_STRUCT = "audio"  # {"bytes": binary, "path": string}
PARQUET_BATCH_ROWS = 256  # bounds memory when rows carry audio bytes or inline features

TEXT_SIDECARS = (".txt", ".lab", ".transcript")
TOKEN_SIDECARS = (".tokens", ".tok")
FRAME_SIDECARS = (".rows", ".frames")  # frame-count hints: the number of feature rows
RECORD_FILE_SUFFIXES = (".jsonl", ".json", ".parquet", ".tsv")
TSV_COLUMNS = "features_path<TAB>rows<TAB>cols<TAB>tokens[<TAB>text]"
UTF8_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class ManifestRecord:
    id: str
    location: str  # "file:line", "file.parquet:row N" or the audio file, for error messages
    audio_path: str | None = None
    text: str | None = None
    tokens: tuple[int, ...] | None = None
    audio_bytes: bytes | None = None  # encoded audio carried inline (Parquet)
    features_path: str | None = None  # precomputed features, resolved like audio_path
    rows: int | None = None  # feature frames (T), from the manifest or a .rows/.frames hint
    cols: int | None = None  # feature dimension (F)
    # Inline features were present and their shape (and, for JSON, their values) checked. The values are
    # carried in ``features`` only when the reader was asked for them (``inline_features=True``).
    has_inline_features: bool = False
    features: np.ndarray | None = None  # (rows, cols) float32, only with inline_features=True
    source: str = ""  # the manifest file (or audio folder) the record was read from

    @property
    def kind(self) -> str | None:
        """``features_inline``, ``features_file``, ``audio_bytes``, ``audio_file``, or None (nothing usable).

        Precomputed features win over audio: they need no extraction, and a manifest giving both most likely
        lists the audio for reference only.
        """
        if self.has_inline_features:
            return "features_inline"
        if self.features_path is not None:
            return "features_file"
        if self.audio_bytes is not None:
            return "audio_bytes"
        if self.audio_path is not None:
            return "audio_file"
        return None


def iter_manifest(
    path: str | Path, report: SkipReport, inline_features: bool = False
) -> Iterator[ManifestRecord]:
    """Stream the records of a manifest file or folder; malformed records go to ``report``.

    A folder is read through the record files inside it (``.jsonl``, ``.json``, ``.parquet``, ``.tsv``,
    sorted by name); a folder without any is scanned for audio files with sidecars. With
    ``inline_features`` the records carry their inline feature values as a (rows, cols) float32 array.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if path.is_dir():
        record_files = sorted(
            p for p in path.iterdir() if p.is_file() and p.suffix.lower() in RECORD_FILE_SUFFIXES
        )
        if record_files:
            for record_file in record_files:
                yield from iter_manifest(record_file, report, inline_features)
        else:
            yield from _iter_audio_folder(path, report)
    elif not path.exists():
        raise FileNotFoundError(f"manifest not found: {path}")
    elif suffix in (".jsonl", ".json"):
        yield from _iter_json_records(path, report, inline_features)
    elif suffix == ".tsv":
        yield from _iter_tsv_records(path, report)
    elif suffix == ".parquet":
        yield from _iter_parquet_records(path, report, inline_features)
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


def iter_text_lines(path: str | Path, report: SkipReport) -> Iterator[tuple[str, str]]:
    """Stream ``(location, line)`` for the non-empty lines of a plain-text file (tokenizer training text),
    stripped; ``location`` is ``file:line``. A BOM and CRLF endings are tolerated; a line that is not
    valid UTF-8 is skipped and counted.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"text file not found: {path}")
    for number, line in _iter_decoded_lines(path, report):
        report.seen += 1
        yield f"{path}:{number}", line.strip()


def _iter_decoded_lines(path: Path, report: SkipReport) -> Iterator[tuple[int, str]]:
    """(line number, text) of each non-blank line, read as bytes so one bad line cannot stop the file."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if number == 1 and raw.startswith(UTF8_BOM):
                raw = raw[len(UTF8_BOM) :]
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as error:
                report.seen += 1
                report.skip("invalid UTF-8", f"{path}:{number}", f"{error}; re-save the file as UTF-8")
                continue
            if line.strip():
                yield number, line


# --- JSON ------------------------------------------------------------------------------------------------


def _iter_json_records(path: Path, report: SkipReport, inline_features: bool) -> Iterator[ManifestRecord]:
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
            location = f"{path}:record {number}"
            record = _record_from_object(obj, path, location, number, report, inline_features)
            if record is not None:
                yield record
        return
    for number, line in _iter_decoded_lines(path, report):
        location = f"{path}:{number}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as error:
            report.seen += 1
            report.skip("malformed JSON", location, str(error))
            continue
        record = _record_from_object(obj, path, location, number, report, inline_features)
        if record is not None:
            yield record


def _record_from_object(
    obj: object, path: Path, location: str, number: int, report: SkipReport, inline_features: bool = False
) -> ManifestRecord | None:
    report.seen += 1
    if not isinstance(obj, dict):
        report.skip("record is not a JSON object", location)
        return None
    utt_id = _first(obj, ID_FIELDS)
    audio = _first(obj, AUDIO_FIELDS)
    tokens = _first(obj, TOKEN_FIELDS)
    features_path = obj.get("features_path")
    try:
        parsed_tokens = parse_tokens(tokens) if tokens is not None else None
    except ValueError as error:
        report.skip("invalid tokens", location, str(error))
        return None
    try:
        rows = _parse_dimension(obj.get("rows"), "rows")
        cols = _parse_dimension(obj.get("cols"), "cols")
    except ValueError as error:
        report.skip("invalid rows/cols", location, str(error))
        return None
    features = obj.get("features")
    if features is not None:
        try:
            rows, cols = _inline_feature_shape(features, rows, cols)
        except ValueError as error:
            report.skip(str(error).split(":")[0], location, str(error))
            return None
    if features_path is not None and not isinstance(features_path, str):
        report.skip("invalid features_path", location, f"expected a string, got {features_path!r:.80}")
        return None
    name_source = audio if audio is not None else features_path
    default_id = Path(str(name_source)).stem if name_source is not None else f"{path.stem}-{number:06d}"
    return ManifestRecord(
        id=str(utt_id if utt_id is not None else default_id),
        location=location,
        audio_path=str(path.parent / audio) if audio is not None else None,
        text=_first(obj, TEXT_FIELDS),
        tokens=parsed_tokens,
        features_path=str(path.parent / features_path) if features_path is not None else None,
        rows=rows,
        cols=cols,
        has_inline_features=features is not None,
        features=_as_array(features, rows, cols) if inline_features and features is not None else None,
        source=str(path),
    )


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


def _parse_dimension(value: object, name: str) -> int | None:
    """A positive feature dimension from an int or a digit string; None stays None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"{name} must be a positive integer, got {value!r:.80}")
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"{name} must be a positive integer, got {value!r:.80}") from None
    if number <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r:.80}")
    return number


# --- TSV -------------------------------------------------------------------------------------------------


def _iter_tsv_records(path: Path, report: SkipReport) -> Iterator[ManifestRecord]:
    """Rows ``features_path, rows, cols, tokens[, text]``; a first line starting ``features_path`` is a header."""
    for number, line in _iter_decoded_lines(path, report):
        fields = line.split("\t")
        if number == 1 and fields[0].strip() == "features_path":
            continue
        report.seen += 1
        location = f"{path}:{number}"
        if len(fields) not in (4, 5):
            report.skip("wrong column count", location, f"expected {TSV_COLUMNS}, got {len(fields)} columns")
            continue
        features_path = fields[0].strip()
        if not features_path:
            report.skip("missing features_path", location, f"expected {TSV_COLUMNS}")
            continue
        try:
            rows = _parse_dimension(fields[1].strip(), "rows")
            cols = _parse_dimension(fields[2].strip(), "cols")
        except ValueError as error:
            report.skip("invalid rows/cols", location, str(error))
            continue
        try:
            tokens = parse_tokens(fields[3])
        except ValueError as error:
            report.skip("invalid tokens", location, str(error))
            continue
        yield ManifestRecord(
            id=str(Path(features_path).with_suffix("")).replace("/", "__"),
            location=location,
            text=fields[4] if len(fields) == 5 else None,
            tokens=tokens,
            features_path=str(path.parent / features_path),
            rows=rows,
            cols=cols,
            source=str(path),
        )


# --- Parquet ---------------------------------------------------------------------------------------------


def _iter_parquet_records(path: Path, report: SkipReport, inline_features: bool) -> Iterator[ManifestRecord]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as error:
        raise InputError(f"{path}: not a readable Parquet file ({error}); re-export it") from None
    names = set(parquet.schema_arrow.names)

    def pick(aliases: tuple[str, ...]) -> str | None:
        return next((name for name in aliases if name in names), None)

    columns = {
        "id": pick(ID_FIELDS),
        "text": pick(TEXT_FIELDS),
        "tokens": pick(PARQUET_TOKEN_FIELDS),
        "features": pick(PARQUET_FEATURE_FIELDS),
        "rows": pick(PARQUET_ROWS_FIELDS),
        "cols": pick(PARQUET_COLS_FIELDS),
        "audio_bytes": pick(PARQUET_AUDIO_BYTES_FIELDS),
        "audio_path": pick(AUDIO_FIELDS),
    }
    hf_audio = HF_AUDIO_STRUCT if HF_AUDIO_STRUCT in names else None
    if hf_audio is not None and not pa.types.is_struct(parquet.schema_arrow.field(hf_audio).type):
        raise InputError(f"{path}: column 'audio' must be a struct {{bytes, path}} (the Hugging Face layout)")
    features_type = parquet.schema_arrow.field(columns["features"]).type if columns["features"] else None
    if features_type is not None and not _is_numeric_list_type(features_type):
        raise InputError(
            f"{path}: column {columns['features']!r} has type {features_type}; expected a list of "
            "numbers (with rows/cols columns) or a list of lists of numbers"
        )
    selected = sorted({name for name in [*columns.values(), hf_audio] if name is not None})
    row_number = 0
    try:
        for batch in parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=selected):
            shapes = _feature_shapes(batch.column(columns["features"])) if columns["features"] else None
            plain = batch.drop_columns([columns["features"]]) if columns["features"] else batch
            for index, row in enumerate(plain.to_pylist()):
                record = _record_from_parquet_row(
                    row, columns, hf_audio, shapes[index] if shapes else None, path, row_number, report
                )
                row_number += 1
                if record is not None and inline_features and record.has_inline_features:
                    values = _flat_values(batch.column(columns["features"])[index])
                    record = dataclasses.replace(
                        record, features=values.reshape(record.rows or 0, record.cols or 0)
                    )
                if record is not None:
                    yield record
    except pa.ArrowException as error:
        raise InputError(
            f"{path}: unreadable Parquet data after row {row_number} ({error}); re-export it"
        ) from None


def _is_numeric_list_type(arrow_type) -> bool:
    """A list (of lists) whose leaves are integers or floats."""
    import pyarrow as pa

    while _is_list_type(arrow_type):
        arrow_type = arrow_type.value_type
    return pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type)


def _flat_values(cell) -> np.ndarray:
    """One Parquet features cell (a flat or 2-D list scalar) as a flat float32 array; nulls become NaN."""
    import numpy as np
    import pyarrow.compute as pc

    values = cell.values
    while _is_list_type(values.type):
        values = pc.list_flatten(values)
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.float32)


def _is_list_type(arrow_type) -> bool:
    import pyarrow as pa

    return (
        pa.types.is_list(arrow_type)
        or pa.types.is_large_list(arrow_type)
        or pa.types.is_fixed_size_list(arrow_type)
    )


def _feature_shapes(column) -> list[tuple[int, int | None] | None]:
    """Per row: None (no features), (values, None) for a flat list, or (rows, cols or -1 if ragged).

    Computed from list offsets, so the feature values are never converted to Python objects.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    outer = pc.list_value_length(column).to_pylist()
    if not _is_list_type(column.type.value_type):
        return [None if n is None else (n, None) for n in outer]
    inner = pc.list_value_length(pc.list_flatten(column)).fill_null(-1).to_numpy(zero_copy_only=False)
    shapes: list[tuple[int, int | None] | None] = []
    start = 0
    for n in outer:
        if n is None:
            shapes.append(None)
            continue
        widths = np.unique(inner[start : start + n])
        shapes.append((n, int(widths[0]) if len(widths) == 1 else -1) if n else (0, 0))
        start += n
    return shapes


def _record_from_parquet_row(
    row: dict,
    columns: dict[str, str | None],
    hf_audio: str | None,
    shape: tuple[int, int | None] | None,
    path: Path,
    row_number: int,
    report: SkipReport,
) -> ManifestRecord | None:
    report.seen += 1
    location = f"{path}:row {row_number}"

    def value(key: str) -> object:
        return row.get(columns[key]) if columns[key] else None

    try:
        tokens = value("tokens")
        parsed_tokens = parse_tokens(tokens) if tokens is not None else None
    except ValueError as error:
        report.skip("invalid tokens", location, str(error))
        return None
    try:
        rows = _parse_dimension(value("rows"), "rows")
        cols = _parse_dimension(value("cols"), "cols")
    except ValueError as error:
        report.skip("invalid rows/cols", location, str(error))
        return None
    if shape is not None:
        try:
            rows, cols = _check_feature_shape(shape, rows, cols)
        except ValueError as error:
            report.skip(str(error).split(":")[0], location, str(error))
            return None
    audio_bytes = value("audio_bytes")
    audio = value("audio_path")
    struct = row.get(hf_audio) if hf_audio else None
    if isinstance(struct, dict):
        audio_bytes = audio_bytes if audio_bytes is not None else struct.get("bytes")
        audio = audio if audio is not None else struct.get("path")
    if audio_bytes is not None and not isinstance(audio_bytes, bytes):
        report.skip("invalid audio bytes", location, f"expected binary, got {type(audio_bytes).__name__}")
        return None
    if audio_bytes is not None and not audio_bytes:
        report.skip("empty audio bytes", location, "the audio bytes cell is empty (0 bytes)")
        return None
    utt_id = value("id")
    default_id = Path(str(audio)).stem if audio else f"{path.stem}-row{row_number:06d}"
    text = value("text")
    return ManifestRecord(
        id=str(utt_id if utt_id is not None else default_id),
        location=location,
        # Inline bytes win; the struct's path (often just the original file name) is only a fallback.
        audio_path=str(path.parent / str(audio)) if audio and audio_bytes is None else None,
        text=str(text) if text is not None else None,
        tokens=parsed_tokens,
        audio_bytes=audio_bytes,
        rows=rows,
        cols=cols,
        has_inline_features=shape is not None,
        source=str(path),
    )


def _check_feature_shape(
    shape: tuple[int, int | None], rows: int | None, cols: int | None
) -> tuple[int, int]:
    count, width = shape
    if width is None:  # flat list of numbers
        if rows is None or cols is None:
            raise ValueError("invalid features: a flat features list needs rows and cols columns")
        if rows * cols != count:
            raise ValueError(
                f"rows*cols does not match: rows={rows} * cols={cols} = {rows * cols}, "
                f"but features has {count} values"
            )
        return rows, cols
    if width == -1:
        raise ValueError("ragged features: every frame of a 2-D features list needs the same length")
    if count == 0:
        raise ValueError("invalid features: the features list is empty")
    if (rows is not None and rows != count) or (cols is not None and cols != width):
        raise ValueError(
            f"rows*cols does not match: rows={rows} cols={cols} but features are {(count, width)}"
        )
    return count, width


# --- audio folders ---------------------------------------------------------------------------------------


def _iter_audio_folder(folder: Path, report: SkipReport) -> Iterator[ManifestRecord]:
    audio_files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in AUDIO_EXTENSIONS)
    for audio in audio_files:
        report.seen += 1
        text_file = _sidecar(audio, TEXT_SIDECARS)
        token_file = _sidecar(audio, TOKEN_SIDECARS)
        frame_file = _sidecar(audio, FRAME_SIDECARS)
        try:
            text = text_file.read_text(encoding="utf-8-sig").strip() if text_file else None
            tokens = parse_tokens(token_file.read_text(encoding="utf-8-sig")) if token_file else None
        except UnicodeDecodeError as error:
            report.skip("invalid UTF-8 in sidecar", str(text_file or token_file), str(error))
            continue
        except ValueError as error:
            report.skip("invalid tokens", str(token_file), str(error))
            continue
        try:
            hint = frame_file.read_text(encoding="utf-8-sig").strip() if frame_file else None
            rows = _parse_dimension(hint, "frame count")
        except (UnicodeDecodeError, ValueError) as error:
            report.skip("invalid frame count", str(frame_file), f"{error}; expected one positive integer")
            continue
        yield ManifestRecord(
            id=str(audio.relative_to(folder).with_suffix("")).replace("/", "__"),
            location=str(audio),
            audio_path=str(audio),
            text=text,
            tokens=tokens,
            rows=rows,
            source=str(folder),
        )


def _sidecar(audio: Path, suffixes: tuple[str, ...]) -> Path | None:
    for suffix in suffixes:
        candidate = audio.with_suffix(suffix)
        if candidate.is_file():
            return candidate
    return None


def _first(obj: dict, fields: tuple[str, ...]) -> object | None:
    for name in fields:
        if obj.get(name) is not None:
            return obj[name]
    return None


def parse_tokens(value: object) -> tuple[int, ...]:
    """Token ids from a list or a whitespace/comma-separated string."""
    if isinstance(value, str):
        parts = value.replace(",", " ").split()
    elif isinstance(value, list | tuple):
        parts = list(value)
    else:
        raise ValueError(f"tokens must be a list or a string, got {type(value).__name__}")
    # A float or bool in a list would silently truncate through int(); only strings are parsed.
    if any(isinstance(part, bool) or not isinstance(part, int | str) for part in parts):
        raise ValueError(f"tokens must be integers, got {value!r:.80}")
    try:
        tokens = tuple(int(part) for part in parts)
    except ValueError:
        raise ValueError(f"tokens must be integers, got {value!r:.80}") from None
    if any(token < 0 for token in tokens):
        raise ValueError(f"tokens must be non-negative, got {value!r:.80}")
    return tokens
