"""What every manifest reader shares: the record, the field aliases, line reading and value checks.

The readers (``io.manifests`` for JSON/JSONL and the dispatch, ``io.tsv``, ``io.parquet``, ``io.folders``,
``io.kaldi``) build ``ManifestRecord``s with these helpers, so a bad value is reported the same way
whatever the form: a ``ValueError`` whose text the reader turns into a counted skip (or, in strict
mode, an ``InputError``) naming the file and the line or row.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from asr_pipeline.io.report import SkipReport

if TYPE_CHECKING:
    import numpy as np

TEXT_FIELDS = ("text", "transcript", "transcription", "sentence", "normalized_text")
TOKEN_FIELDS = ("tokens", "target", "targets")
ID_FIELDS = ("id", "utt_id", "utterance_id", "key", "sample_id")
AUDIO_FIELDS = ("audio_path", "path", "file", "file_path")
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
    # A part of a longer recording (a Kaldi ``segments`` line): the utterance starts ``offset_sec`` into
    # ``audio_path`` and lasts ``duration_sec`` (None: to the end). Decode it with
    # ``io.audio_segment.load_audio_segment``; both None means the whole file.
    offset_sec: float | None = None
    duration_sec: float | None = None

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


def iter_decoded_lines(path: Path, report: SkipReport) -> Iterator[tuple[int, str]]:
    """(line number, text) of each non-blank line, read as bytes so one bad line cannot stop the file.

    A BOM and CRLF endings are tolerated; a line that is not UTF-8 is counted as seen and skipped.
    """
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


class DefaultIds:
    """Ids for records that name none, derived from their file: unique within one manifest.

    A file's id is its ``base`` (the stem, or the relative path without extension for folders). When a
    different file of the same manifest already took that id (``stereo.opus`` before ``stereo.sph``), the
    later one keeps its extension (``stereo.sph``), and failing that its full name with ``/`` as ``__``.
    Files come in manifest order (folders: sorted), so the rule is deterministic, and an id never changes
    when files are added after it. The same file listed twice keeps one id: a real duplicate, counted as
    such downstream.
    """

    def __init__(self) -> None:
        self._owner: dict[str, str] = {}

    def for_file(self, file: str, base: str | None = None) -> str:
        path = Path(file)
        candidates = (
            base if base is not None else path.stem,
            (base if base is not None else path.stem) + path.suffix,
            file.replace("/", "__"),
        )
        for candidate in candidates:
            if self._owner.setdefault(candidate, file) == file:
                return candidate
        return candidates[-1]


def check_text(value: object, field: str = "text") -> str | None:
    """A transcript as given: a string or None; anything else (a number, a list) raises ValueError."""
    if value is None or isinstance(value, str):
        return value
    raise ValueError(
        f"{field} must be a string, got {type(value).__name__} {value!r:.40}; quote it in the manifest"
    )


def first_field(obj: dict, fields: tuple[str, ...]) -> tuple[str, object] | tuple[None, None]:
    """(name, value) of the first of ``fields`` that ``obj`` holds a non-null value for."""
    for name in fields:
        if obj.get(name) is not None:
            return name, obj[name]
    return None, None


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


def parse_dimension(value: object, name: str) -> int | None:
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
