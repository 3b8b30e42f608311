"""Precomputed features and embedded payloads: what the features stage takes from a manifest as it is.

Two jobs:

* ``attach_payloads`` puts the bulky part of a record back onto its manifest row. The transcripts stage keeps
  the normalized manifest small (ids, paths, text, tokens), so embedded audio bytes and inline features stay
  in the raw manifest; here they are re-read, streaming, from the row's ``source`` at its ``location``.
* ``load_precomputed`` turns inline features or a feature file (``.npy``, or whitespace-separated numbers in
  any other file, one frame per line or all on one line with ``rows``/``cols`` given) into a checked
  (T, F) float32 array. Precomputed features are never re-extracted; they are validated: numeric, ``rows *
  cols`` matching the data, finite, and as wide as the model's input (``input_dim``).

Their ``duration_ms`` is ``rows`` times the configured frontend's frame shift (10 ms for fbank, 20 ms for
w2v-BERT's stacked frame pairs), set by the callers (``features.extract``, ``data.audio_dataset``). The
length index and ``max_audio_duration_sec`` see them through it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from asr_pipeline.io.manifests import ManifestRecord, iter_manifest
from asr_pipeline.io.report import SkipReport

# Kinds whose payload lives only in the raw manifest (see io/manifests.py ManifestRecord.kind).
PAYLOAD_KINDS = ("audio_bytes", "features_inline")
# Set on a row whose payload could not be found again; featurize_row turns it into a counted skip.
PAYLOAD_ERROR = "payload_error"


class FeatureError(ValueError):
    """Precomputed features that cannot be used; ``reason`` is the skip-report key, the message the detail."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


# --- payloads --------------------------------------------------------------------------------------------


class _SourceCursor:
    """One raw manifest read forward from the start, with inline features, to find records by location."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._records: Iterator[ManifestRecord] = iter(())
        self._restart()

    def _restart(self) -> None:
        self.close()
        # Reading problems were counted by the transcripts stage already; here they only mean "not this one".
        self._records = iter_manifest(self.source, SkipReport(), inline_features=True)

    def find(self, location: str) -> ManifestRecord | None:
        for record in self._records:
            if record.location == location:
                return record
        # Rows of one source normally arrive in file order, so this second pass only runs for a row that
        # is out of order or gone from the file.
        self._restart()
        for record in self._records:
            if record.location == location:
                return record
        return None

    def close(self) -> None:
        close = getattr(self._records, "close", None)
        if close is not None:
            close()


def attach_payloads(rows: Iterable[dict]) -> Iterator[dict]:
    """Yield ``rows`` in order, with ``audio_bytes`` or ``features`` (a (T, F) array) put back where needed.

    Rows of other kinds pass through untouched. One reader is open at a time, advanced along its source;
    switching sources closes it (a folder of many record files must not hold a file handle per file). A
    row whose record is no longer at its location (the raw manifest changed after the transcripts stage)
    gets a ``payload_error`` instead, which the features stage counts as a skip.
    """
    cursor: _SourceCursor | None = None
    try:
        for row in rows:
            if row.get("kind") not in PAYLOAD_KINDS:
                yield row
                continue
            if cursor is None or cursor.source != row["source"]:
                if cursor is not None:
                    cursor.close()
                cursor = _SourceCursor(row["source"])
            record = cursor.find(row["location"])
            if record is None or record.id != row["id"]:
                found = "nothing" if record is None else f"record {record.id!r}"
                yield {
                    **row,
                    PAYLOAD_ERROR: f"{found} at {row['location']} where {row['id']!r} was; the raw manifest "
                    "changed after the transcripts stage: rerun it (dvc repro)",
                }
                continue
            if row["kind"] == "audio_bytes":
                yield {**row, "audio_bytes": record.audio_bytes}
            else:
                yield {**row, "features": record.features}
    finally:
        if cursor is not None:
            cursor.close()


# --- precomputed features --------------------------------------------------------------------------------


def load_precomputed(row: dict, input_dim: int) -> np.ndarray:
    """The checked (T, F) float32 features of a ``features_inline`` or ``features_file`` row.

    Raises ``FeatureError`` (missing file, unreadable feature file, non-numeric features, rows*cols does not
    match, NaN/Inf features, feature width differs from input_dim).
    """
    rows, cols = row.get("rows"), row.get("cols")
    if row.get("kind") == "features_inline":
        if row.get("features") is None:
            raise FeatureError(
                "missing features", "the row has no inline features attached (attach_payloads)"
            )
        features = _shaped(np.asarray(row["features"]), rows, cols, "the inline features")
    else:
        features = read_feature_file(Path(row["features_path"]), rows, cols)
    return check_features(features, input_dim)


def read_feature_file(path: Path, rows: int | None = None, cols: int | None = None) -> np.ndarray:
    """A ``.npy`` array or a text file of whitespace-separated numbers as (T, F), checked against rows/cols."""
    if not path.is_file():
        raise FeatureError("missing file", f"feature file {path} not found")
    if path.suffix.lower() == ".npy":
        try:
            array = np.load(path, allow_pickle=False)  # never unpickle objects from a data file
        except (ValueError, OSError, EOFError) as error:
            raise FeatureError(
                "unreadable feature file", f"{path}: {error}; re-save it with numpy.save"
            ) from None
        if array.dtype.kind not in "biuf":
            raise FeatureError("non-numeric features", f"{path} holds {array.dtype} values, not numbers")
        return _shaped(array, rows, cols, str(path))
    # With rows and cols given, line breaks in a text file carry no meaning (the data may wrap anywhere).
    flat = rows is not None and cols is not None
    return _shaped(_read_text_numbers(path, flat), rows, cols, str(path))


def _read_text_numbers(path: Path, flat: bool) -> np.ndarray:
    """Whitespace-separated numbers: flat, or else (lines, width) if every non-empty line is equally wide."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as error:
        raise FeatureError("unreadable feature file", f"{path}: not UTF-8 text ({error})") from None
    lines = [(number, line.split()) for number, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        raise FeatureError("unreadable feature file", f"{path} holds no numbers")
    values: list[float] = []
    for number, tokens in lines:
        for token in tokens:
            try:
                values.append(float(token))
            except ValueError:
                raise FeatureError(
                    "non-numeric features", f"{path}:{number}: {token!r:.40} is not a number"
                ) from None
    widths = {len(tokens) for _, tokens in lines}
    array = np.asarray(values, dtype=np.float32)
    return array.reshape(len(lines), widths.pop()) if len(widths) == 1 and not flat else array


def _shaped(array: np.ndarray, rows: int | None, cols: int | None, what: str) -> np.ndarray:
    """``array`` as (rows, cols): a 2-D array must agree with any rows/cols given; a flat one needs both."""
    if (
        array.ndim == 2
        and (rows is None or rows == array.shape[0])
        and (cols is None or cols == array.shape[1])
    ):
        return array
    if array.ndim == 1 and rows is not None and cols is not None and array.size == rows * cols:
        return array.reshape(rows, cols)
    if array.ndim not in (1, 2):
        raise FeatureError(
            "rows*cols does not match", f"{what} has {array.ndim} dimensions; expected (rows, cols)"
        )
    if rows is None or cols is None:
        raise FeatureError(
            "rows*cols does not match",
            f"{what} has shape {array.shape}: give rows and cols for flat data, or one frame per line",
        )
    raise FeatureError(
        "rows*cols does not match",
        f"rows={rows} * cols={cols} = {rows * cols}, but {what} has {array.size} values (shape {array.shape})",
    )


def check_features(features: np.ndarray, input_dim: int) -> np.ndarray:
    """(T, F) float32 after checking it is non-empty, finite and ``input_dim`` wide."""
    if features.dtype.kind not in "biuf":
        raise FeatureError("non-numeric features", f"values of type {features.dtype}, not numbers")
    if features.shape[0] == 0 or features.shape[1] == 0:
        raise FeatureError("rows*cols does not match", f"the features are empty (shape {features.shape})")
    features = np.ascontiguousarray(features, dtype=np.float32)
    if not np.isfinite(features).all():
        bad_frame = int(np.flatnonzero(~np.isfinite(features).all(axis=1))[0])
        raise FeatureError("NaN/Inf features", f"frame {bad_frame} holds NaN or Inf")
    if features.shape[1] != input_dim:
        raise FeatureError(
            "feature width differs from input_dim",
            f"{features.shape[1]} values per frame, but the model input is {input_dim} wide "
            "(features.input_dim / --input-dim)",
        )
    return features
