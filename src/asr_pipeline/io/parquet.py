"""Parquet manifests: record tables (the reference trainer's columns, Hugging Face ``datasets`` exports).

Columns are found by alias (``io.records`` field names, plus the Parquet-only ones below); only those
columns are read, in batches, so a table carrying audio bytes or inline features streams. A row is located
as ``file.parquet:row N``, counted from 0 as in pyarrow/pandas. Paths resolve against the file's folder.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from asr_pipeline.io.records import (
    AUDIO_FIELDS,
    ID_FIELDS,
    TEXT_FIELDS,
    TOKEN_FIELDS,
    DefaultIds,
    ManifestRecord,
    parse_dimension,
    parse_tokens,
)
from asr_pipeline.io.report import InputError, SkipReport

if TYPE_CHECKING:
    import numpy as np

# Hugging Face datasets name token ids `labels`, and carry audio inline (issue 3).
PARQUET_TOKEN_FIELDS = (*TOKEN_FIELDS, "labels", "label_ids")
PARQUET_FEATURE_FIELDS = ("features", "input_features", "feature", "fbank", "filterbank")
PARQUET_ROWS_FIELDS = ("rows", "num_frames", "frames", "feature_rows")
PARQUET_COLS_FIELDS = ("cols", "feature_dim", "num_features")
PARQUET_AUDIO_BYTES_FIELDS = ("audio_bytes", "bytes", "wav", "audio_data")
HF_AUDIO_STRUCT = "audio"  # {"bytes": binary, "path": string}
PARQUET_BATCH_ROWS = 256  # bounds memory when rows carry audio bytes or inline features
HF_SAVED_STATE = (
    "state.json"  # datasets' save_to_disk: {"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}
)


def iter_parquet_records(path: Path, report: SkipReport, inline_features: bool) -> Iterator[ManifestRecord]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as error:
        raise InputError(f"{path}: not a readable Parquet file ({error}); re-export it") from None

    def batches(columns: list[str]) -> Iterator:
        return parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=columns)

    yield from _iter_table_records(path, parquet.schema_arrow, batches, report, inline_features, "Parquet")


def iter_arrow_records(path: Path, report: SkipReport, inline_features: bool) -> Iterator[ManifestRecord]:
    """Records of an Arrow IPC file (stream or file format): a Hugging Face ``datasets`` shard
    (``save_to_disk``'s ``data-*.arrow``, the datasets cache), read batch by batch like a Parquet table."""
    import pyarrow as pa

    try:
        source = pa.memory_map(str(path))
        try:
            reader = pa.ipc.open_stream(source)
        except pa.ArrowInvalid:
            source.seek(0)
            file_reader = pa.ipc.open_file(source)
            reader = (file_reader.get_batch(i) for i in range(file_reader.num_record_batches))
            schema = file_reader.schema
        else:
            schema = reader.schema
    except (pa.ArrowException, OSError) as error:
        raise InputError(f"{path}: not a readable Arrow IPC file ({error}); re-save it") from None

    def batches(columns: list[str]) -> Iterator:
        for batch in reader:  # Hugging Face writes batches of 1,000 rows: bounded like Parquet's
            yield batch.select(columns)

    yield from _iter_table_records(path, schema, batches, report, inline_features, "Arrow")


def iter_saved_dataset(folder: Path, report: SkipReport, inline_features: bool) -> Iterator[ManifestRecord]:
    """Records of a ``datasets.Dataset.save_to_disk`` folder: its ``state.json`` lists the Arrow shards in order."""
    import json

    files = [entry["filename"] for entry in json.loads((folder / HF_SAVED_STATE).read_text())["_data_files"]]
    for name in files:
        yield from iter_arrow_records(folder / name, report, inline_features)


def is_saved_dataset(folder: Path) -> bool:
    """A folder ``datasets.Dataset.save_to_disk`` wrote (not a ``DatasetDict``'s top folder: name a split)."""
    return (folder / HF_SAVED_STATE).is_file() and (folder / "dataset_info.json").is_file()


def _iter_table_records(
    path: Path, schema, batches, report: SkipReport, inline_features: bool, kind: str
) -> Iterator[ManifestRecord]:
    """Records of a table read in column-selected batches (``batches(columns)``): Parquet or Arrow."""
    import pyarrow as pa

    names = set(schema.names)

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
    if hf_audio is not None and not pa.types.is_struct(schema.field(hf_audio).type):
        raise InputError(f"{path}: column 'audio' must be a struct {{bytes, path}} (the Hugging Face layout)")
    features_type = schema.field(columns["features"]).type if columns["features"] else None
    if features_type is not None and not _is_numeric_list_type(features_type):
        raise InputError(
            f"{path}: column {columns['features']!r} has type {features_type}; expected a list of "
            "numbers (with rows/cols columns) or a list of lists of numbers"
        )
    selected = sorted({name for name in [*columns.values(), hf_audio] if name is not None})
    row_number = 0
    ids = DefaultIds()
    try:
        for batch in batches(selected):
            shapes = _feature_shapes(batch.column(columns["features"])) if columns["features"] else None
            plain = batch.drop_columns([columns["features"]]) if columns["features"] else batch
            for index, row in enumerate(plain.to_pylist()):
                record = _record_from_parquet_row(
                    row, columns, hf_audio, shapes[index] if shapes else None, path, row_number, ids, report
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
            f"{path}: unreadable {kind} data after row {row_number} ({error}); re-export it"
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
    ids: DefaultIds,
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
        rows = parse_dimension(value("rows"), "rows")
        cols = parse_dimension(value("cols"), "cols")
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
    if utt_id is None:
        utt_id = ids.for_file(os.path.normpath(str(audio))) if audio else f"{path.stem}-row{row_number:06d}"
    text = value("text")
    return ManifestRecord(
        id=str(utt_id),
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
