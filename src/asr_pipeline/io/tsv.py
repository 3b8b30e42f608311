"""TSV manifests: feature lists, audio lists and Common Voice tables, told apart by their first line.

* A first line whose first column is ``features_path`` is the header of a **feature list**; a first line
  naming an audio column (``audio_path``, ``path``, ``file``, ``file_path``) is the header of an **audio
  table**, read by column name: the audio, the transcript (``text``, ``sentence``, ...), and optionally an
  id and tokens. Common Voice's ``train.tsv`` (``client_id path sentence ...``) is one.
* Without a header, a first column ending in an audio extension (``.wav``, ``.flac``, ...) makes an
  **audio list**, ``audio_path<TAB>text``; anything else is a feature list,
  ``features_path<TAB>rows<TAB>cols<TAB>tokens[<TAB>text]`` as before.

Every later row is read as the first line decided. Paths resolve against the TSV's folder; an audio file
that is not there but is in a sibling ``clips/`` folder (Common Voice's layout) is taken from there.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from asr_pipeline.io.audio import AUDIO_EXTENSIONS
from asr_pipeline.io.records import (
    AUDIO_FIELDS,
    ID_FIELDS,
    TEXT_FIELDS,
    TOKEN_FIELDS,
    DefaultIds,
    ManifestRecord,
    iter_decoded_lines,
    parse_dimension,
    parse_tokens,
)
from asr_pipeline.io.report import InputError, SkipReport

FEATURE_TSV_COLUMNS = "features_path<TAB>rows<TAB>cols<TAB>tokens[<TAB>text]"
AUDIO_TSV_COLUMNS = "audio_path<TAB>text"
CLIPS_FOLDER = "clips"  # Common Voice keeps the audio its TSVs name in <corpus>/clips/


@dataclass(frozen=True)
class AudioColumns:
    """Where an audio table's fields are: column indexes, and how many columns a row has."""

    count: int
    audio: int
    text: int | None
    id: int | None = None
    tokens: int | None = None
    layout: str = AUDIO_TSV_COLUMNS  # what a row must look like, for error messages

    @classmethod
    def from_header(cls, path: Path, number: int, names: list[str]) -> AudioColumns:
        def index(aliases: tuple[str, ...]) -> int | None:
            return next((names.index(name) for name in aliases if name in names), None)

        audio, text, tokens = index(AUDIO_FIELDS), index(TEXT_FIELDS), index(TOKEN_FIELDS)
        assert audio is not None  # the caller saw an audio column
        if text is None and tokens is None:
            raise InputError(
                f"{path}:{number}: the header names the audio column {names[audio]!r} but no transcript "
                f"column; add one named one of {', '.join(TEXT_FIELDS)} (or tokens)"
            )
        return cls(len(names), audio, text, index(ID_FIELDS), tokens, "<TAB>".join(names))


HEADERLESS_AUDIO = AudioColumns(count=2, audio=0, text=1)


def iter_tsv_records(path: Path, report: SkipReport) -> Iterator[ManifestRecord]:
    """The records of a feature list, audio list or audio table (module docstring)."""
    lines = iter_decoded_lines(path, report)
    first = next(lines, None)
    if first is None:
        return
    number, line = first
    names = [field.strip() for field in line.split("\t")]
    if names[0] == "features_path":
        yield from _feature_rows(path, lines, report)
    elif set(names) & set(AUDIO_FIELDS):
        yield from _audio_rows(path, lines, AudioColumns.from_header(path, number, names), report)
    elif Path(names[0]).suffix.lower() in AUDIO_EXTENSIONS:
        yield from _audio_rows(path, itertools.chain([first], lines), HEADERLESS_AUDIO, report)
    else:
        yield from _feature_rows(path, itertools.chain([first], lines), report)


def _audio_rows(
    path: Path, lines: Iterator[tuple[int, str]], columns: AudioColumns, report: SkipReport
) -> Iterator[ManifestRecord]:
    ids = DefaultIds()
    for number, line in lines:
        report.seen += 1
        location = f"{path}:{number}"
        fields = line.split("\t")
        if len(fields) != columns.count:
            report.skip(
                "wrong column count", location, f"expected {columns.layout}, got {len(fields)} columns"
            )
            continue
        audio = fields[columns.audio].strip()
        if not audio:
            report.skip("missing audio path", location, f"expected {columns.layout}")
            continue
        tokens = fields[columns.tokens].strip() if columns.tokens is not None else ""
        try:
            parsed_tokens = parse_tokens(tokens) if tokens else None
        except ValueError as error:
            report.skip("invalid tokens", location, str(error))
            continue
        given_id = fields[columns.id].strip() if columns.id is not None else ""
        yield ManifestRecord(
            id=given_id or ids.for_file(os.path.normpath(audio)),
            location=location,
            audio_path=str(resolve_clip(path, audio)),
            text=fields[columns.text] if columns.text is not None else None,
            tokens=parsed_tokens,
            source=str(path),
        )


def resolve_clip(tsv: Path, audio: str) -> Path:
    """``audio`` relative to the TSV's folder, or to its ``clips/`` folder when only that one holds it."""
    beside = tsv.parent / audio
    clip = tsv.parent / CLIPS_FOLDER / audio
    return clip if not beside.exists() and clip.exists() else beside


def _feature_rows(
    path: Path, lines: Iterator[tuple[int, str]], report: SkipReport
) -> Iterator[ManifestRecord]:
    ids = DefaultIds()
    for number, line in lines:
        fields = line.split("\t")
        report.seen += 1
        location = f"{path}:{number}"
        if len(fields) not in (4, 5):
            report.skip(
                "wrong column count",
                location,
                f"expected {FEATURE_TSV_COLUMNS}, got {len(fields)} columns (an audio list, "
                f"{AUDIO_TSV_COLUMNS}, needs a first column ending in {'/'.join(AUDIO_EXTENSIONS)} "
                "or a header row naming audio_path)",
            )
            continue
        features_path = fields[0].strip()
        if not features_path:
            report.skip("missing features_path", location, f"expected {FEATURE_TSV_COLUMNS}")
            continue
        try:
            rows = parse_dimension(fields[1].strip(), "rows")
            cols = parse_dimension(fields[2].strip(), "cols")
        except ValueError as error:
            report.skip("invalid rows/cols", location, str(error))
            continue
        try:
            tokens = parse_tokens(fields[3])
        except ValueError as error:
            report.skip("invalid tokens", location, str(error))
            continue
        base = str(Path(features_path).with_suffix("")).replace("/", "__")
        yield ManifestRecord(
            id=ids.for_file(os.path.normpath(features_path), base),
            location=location,
            text=fields[4] if len(fields) == 5 else None,
            tokens=tokens,
            features_path=str(path.parent / features_path),
            rows=rows,
            cols=cols,
            source=str(path),
        )
