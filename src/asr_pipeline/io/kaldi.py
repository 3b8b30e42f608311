"""Kaldi data directories: a folder with ``wav.scp`` and ``text``, optionally ``segments``.

* ``wav.scp``: ``<recording-id> <path>``. Paths resolve against the data directory (like every manifest's
  relative paths). Piped commands (a value ending in ``|``) and archive offsets (``foo.ark:123``) cannot be
  read here: an utterance that needs one is skipped, counted under a reason saying so, at its wav.scp line.
* ``text``: ``<utt-id> <transcript>``: one record per line, located at ``text:line``.
* ``segments`` (optional): ``<utt-id> <recording-id> <start-sec> <end-sec>`` cuts a recording into
  utterances; the record carries ``offset_sec = start`` and ``duration_sec = end - start`` (an end of
  ``-1`` means the end of the recording, as in Kaldi's ``extract-segments``: ``duration_sec`` None).
  Without it, every utterance id is a recording id.

Skipped and counted: an utterance whose segment or recording is missing or malformed (``no audio for
utterance``, ``invalid segment``, ...), and a recording (or, with segments, a segment) that no ``text`` line
names (``no transcript``). A segment's optional fifth column (the channel) is not supported.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from asr_pipeline.io.records import ManifestRecord, iter_decoded_lines
from asr_pipeline.io.report import InputError, SkipReport

WAV_SCP = "wav.scp"
TEXT = "text"
SEGMENTS = "segments"
_ARCHIVE_OFFSET = re.compile(r"\.ark:\d+$")


@dataclass(frozen=True)
class TableLine:
    """One ``<key> <value>`` line of a Kaldi table file."""

    location: str  # file:line
    value: str  # the rest of the line after the key, stripped


class _Unusable(Exception):
    """An utterance that cannot be read: the skip reason, the line to blame (None: its text line), why."""

    def __init__(self, reason: str, location: str | None, detail: str) -> None:
        super().__init__(reason)
        self.reason, self.location, self.detail = reason, location, detail


def is_kaldi_data_dir(folder: Path) -> bool:
    return (folder / WAV_SCP).is_file()


def iter_kaldi_data_dir(folder: Path, report: SkipReport) -> Iterator[ManifestRecord]:
    """One record per line of ``text`` (module docstring); wav.scp and segments are held in memory."""
    text_file = folder / TEXT
    if not text_file.is_file():
        raise InputError(
            f"{folder}: a Kaldi data dir (it has {WAV_SCP}) needs a `{TEXT}` file next to it, one "
            "`<utt-id> <transcript>` line per utterance"
        )
    recordings = read_table(folder / WAV_SCP, report)
    segments = read_table(folder / SEGMENTS, report) if (folder / SEGMENTS).is_file() else None
    utterances: set[str] = set()
    for number, line in iter_decoded_lines(text_file, report):
        report.seen += 1
        location = f"{text_file}:{number}"
        utt_id, transcript = (*line.split(maxsplit=1), "")[:2]
        utterances.add(utt_id)
        try:
            audio, offset_sec, duration_sec = _audio_of(utt_id, folder, recordings, segments)
        except _Unusable as problem:
            report.skip(
                problem.reason, problem.location or location, f"utterance {utt_id!r}: {problem.detail}"
            )
            continue
        yield ManifestRecord(
            id=utt_id,
            location=location,
            audio_path=str(audio),
            text=transcript.strip(),
            offset_sec=offset_sec,
            duration_sec=duration_sec,
            source=str(folder),
        )
    unnamed = segments if segments is not None else recordings
    for key, entry in unnamed.items():
        if key not in utterances:
            report.seen += 1
            report.skip("no transcript", entry.location, f"{key!r} has no line in {text_file}")


def read_table(path: Path, report: SkipReport) -> dict[str, TableLine]:
    """``{key: line}`` of a Kaldi table file; a repeated key is counted as ``duplicate id``, the first kept."""
    table: dict[str, TableLine] = {}
    for number, line in iter_decoded_lines(path, report):
        key, value = (*line.split(maxsplit=1), "")[:2]
        location = f"{path}:{number}"
        if key in table:
            report.seen += 1
            report.skip("duplicate id", location, f"{key!r} first at {table[key].location}")
            continue
        table[key] = TableLine(location, value.strip())
    return table


def _audio_of(
    utt_id: str, folder: Path, recordings: dict[str, TableLine], segments: dict[str, TableLine] | None
) -> tuple[Path, float | None, float | None]:
    """(audio path, offset_sec, duration_sec) of an utterance; raises ``_Unusable``."""
    recording_id, offset_sec, duration_sec = utt_id, None, None
    if segments is not None:
        segment = segments.get(utt_id)
        if segment is None:
            raise _Unusable("no audio for utterance", None, f"no line for it in {folder / SEGMENTS}")
        recording_id, offset_sec, duration_sec = _parse_segment(segment)
    recording = recordings.get(recording_id)
    if recording is None:
        raise _Unusable(
            "no audio for utterance", None, f"recording {recording_id!r} is not in {folder / WAV_SCP}"
        )
    return _wav_path(recording, folder), offset_sec, duration_sec


def _parse_segment(segment: TableLine) -> tuple[str, float, float | None]:
    """(recording id, start, duration or None for "to the end") of a ``segments`` value; raises ``_Unusable``."""
    fields = segment.value.split()
    expected = "expected <utt-id> <recording-id> <start-sec> <end-sec>"
    if len(fields) == 4:
        raise _Unusable(
            "segment channel (unsupported)", segment.location, f"{expected}; split the channels into files"
        )
    if len(fields) != 3:
        raise _Unusable("invalid segment", segment.location, expected)
    try:
        start, end = float(fields[1]), float(fields[2])
    except ValueError:
        raise _Unusable(
            "invalid segment", segment.location, f"{expected}, got {segment.value!r:.80}"
        ) from None
    if not (math.isfinite(start) and math.isfinite(end)) or start < 0 or (end != -1 and end <= start):
        raise _Unusable(
            "invalid segment", segment.location, f"needs 0 <= start < end (or end -1), got {start} {end}"
        )
    return fields[0], start, None if end == -1 else end - start


def _wav_path(recording: TableLine, folder: Path) -> Path:
    value = recording.value
    if not value:
        raise _Unusable("invalid wav.scp line", recording.location, "expected <recording-id> <path>")
    if value.endswith("|"):
        raise _Unusable(
            "piped command in wav.scp (unsupported)",
            recording.location,
            f"{value!r:.80}: run the command once, save the audio to a file and list that file's path",
        )
    if _ARCHIVE_OFFSET.search(value):
        raise _Unusable(
            "archive offset in wav.scp (unsupported)",
            recording.location,
            f"{value!r:.80}: extract the audio to files (wav-copy) and list their paths",
        )
    return folder / value
