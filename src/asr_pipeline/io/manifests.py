"""Manifest readers: JSONL/JSON records and audio folders with sidecar transcripts, streamed.

Every reader yields ``ManifestRecord``s whose ``location`` names the file and line (or file), so a
bad record can be reported precisely. Relative audio paths resolve against the manifest's folder.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from asr_pipeline.io.audio import AUDIO_EXTENSIONS
from asr_pipeline.io.report import SkipReport

TEXT_FIELDS = ("text", "transcript", "transcription", "sentence", "normalized_text")
TOKEN_FIELDS = ("tokens", "target", "targets")
ID_FIELDS = ("id", "utt_id", "utterance_id", "key", "sample_id")
AUDIO_FIELDS = ("audio_path", "path", "file", "file_path")
TEXT_SIDECARS = (".txt", ".lab", ".transcript")
TOKEN_SIDECARS = (".tokens", ".tok")
RECORD_FILE_SUFFIXES = (".jsonl", ".json")


@dataclass(frozen=True)
class ManifestRecord:
    id: str
    location: str  # "file:line" or the audio file, for error messages
    audio_path: str | None = None
    text: str | None = None
    tokens: tuple[int, ...] | None = None


def iter_manifest(path: str | Path, report: SkipReport) -> Iterator[ManifestRecord]:
    """Stream the records of a manifest file or folder; malformed records go to ``report``."""
    path = Path(path)
    if path.is_dir():
        record_files = sorted(p for p in path.iterdir() if p.suffix in RECORD_FILE_SUFFIXES)
        if record_files:
            for record_file in record_files:
                yield from iter_manifest(record_file, report)
        else:
            yield from _iter_audio_folder(path, report)
    elif path.suffix in RECORD_FILE_SUFFIXES:
        yield from _iter_json_records(path, report)
    elif not path.exists():
        raise FileNotFoundError(f"manifest not found: {path}")
    else:
        raise ValueError(
            f"{path}: unsupported manifest type {path.suffix!r}; "
            f"expected a folder or one of {RECORD_FILE_SUFFIXES}"
        )


def _iter_json_records(path: Path, report: SkipReport) -> Iterator[ManifestRecord]:
    with path.open(encoding="utf-8-sig", newline=None) as handle:  # tolerates a BOM and CRLF
        if path.suffix == ".json" and handle.read(1) == "[":
            handle.seek(0)
            for number, obj in enumerate(json.load(handle), start=1):
                record = _record_from_object(obj, path, f"{path}:record {number}", number, report)
                if record is not None:
                    yield record
            return
        handle.seek(0)
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            location = f"{path}:{number}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as error:
                report.seen += 1
                report.skip("malformed JSON", location, str(error))
                continue
            record = _record_from_object(obj, path, location, number, report)
            if record is not None:
                yield record


def _record_from_object(
    obj: object, path: Path, location: str, number: int, report: SkipReport
) -> ManifestRecord | None:
    report.seen += 1
    if not isinstance(obj, dict):
        report.skip("record is not a JSON object", location)
        return None
    utt_id = _first(obj, ID_FIELDS)
    audio = _first(obj, AUDIO_FIELDS)
    text = _first(obj, TEXT_FIELDS)
    tokens = _first(obj, TOKEN_FIELDS)
    try:
        parsed_tokens = parse_tokens(tokens) if tokens is not None else None
    except ValueError as error:
        report.skip("invalid tokens", location, str(error))
        return None
    audio_path = str(path.parent / audio) if audio is not None else None
    default_id = Path(audio).stem if audio is not None else f"{path.stem}-{number:06d}"
    return ManifestRecord(
        id=str(utt_id if utt_id is not None else default_id),
        location=location,
        audio_path=audio_path,
        text=text,
        tokens=parsed_tokens,
    )


def _iter_audio_folder(folder: Path, report: SkipReport) -> Iterator[ManifestRecord]:
    audio_files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in AUDIO_EXTENSIONS)
    for audio in audio_files:
        report.seen += 1
        text_file = _sidecar(audio, TEXT_SIDECARS)
        token_file = _sidecar(audio, TOKEN_SIDECARS)
        try:
            text = text_file.read_text(encoding="utf-8-sig").strip() if text_file else None
            tokens = parse_tokens(token_file.read_text(encoding="utf-8-sig")) if token_file else None
        except UnicodeDecodeError as error:
            report.skip("invalid UTF-8 in sidecar", str(text_file or token_file), str(error))
            continue
        except ValueError as error:
            report.skip("invalid tokens", str(token_file), str(error))
            continue
        yield ManifestRecord(
            id=str(audio.relative_to(folder).with_suffix("")).replace("/", "__"),
            location=str(audio),
            audio_path=str(audio),
            text=text,
            tokens=tokens,
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
    try:
        tokens = tuple(int(part) for part in parts)
    except (TypeError, ValueError):
        raise ValueError(f"tokens must be integers, got {value!r:.80}") from None
    if any(token < 0 for token in tokens):
        raise ValueError(f"tokens must be non-negative, got {value!r:.80}")
    return tokens
