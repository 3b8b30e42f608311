"""Folders of audio: plain audio folders with sidecar files, and LibriSpeech trees.

Both are walked the same way (``walk_files``): sorted, hidden entries (``.*``) ignored, symlinked folders
followed. A link back to a folder that contains it (a loop) is counted as a skip, ``symlink loop``, and
not entered; a folder reached a second time through another link is counted as ``folder linked twice``
and read once. A FIFO, device or socket is counted as ``not a regular file`` and never opened (reading
one blocks or never ends). A folder is a folder whatever its name (``x.wav/`` is walked like any other).

* **LibriSpeech** (any ``*.trans.txt`` below the folder): ``<speaker>/<chapter>/<speaker>-<chapter>.trans.txt``
  lists ``<utt-id> TRANSCRIPT`` lines, the audio is ``<utt-id>.flac`` (or another audio extension) beside
  it. One record per line, id = the utterance id, located at ``file.trans.txt:line``. A line without its
  audio file is skipped as ``missing audio``, an audio file no line names as ``no transcript``; other files
  (``SPEAKERS.TXT``, ``README``) are documentation and ignored.
* **Audio folders**: every audio file is a record, its transcript in a ``.txt``/``.lab``/``.transcript``
  sidecar, token ids in ``.tokens``/``.tok``, a frame-count hint in ``.rows``/``.frames``. The id is the
  path below the folder without extension, ``/`` as ``__`` (see ``DefaultIds`` for stems that several
  files share). Any other file is counted as a skip, ``unsupported extension``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from asr_pipeline.io.audio import AUDIO_EXTENSIONS, NOT_REGULAR, file_kind
from asr_pipeline.io.records import (
    DefaultIds,
    ManifestRecord,
    iter_decoded_lines,
    parse_dimension,
    parse_tokens,
)
from asr_pipeline.io.report import SkipReport

TEXT_SIDECARS = (".txt", ".lab", ".transcript")
TOKEN_SIDECARS = (".tokens", ".tok")
FRAME_SIDECARS = (".rows", ".frames")  # frame-count hints: the number of feature rows
SIDECARS = (*TEXT_SIDECARS, *TOKEN_SIDECARS, *FRAME_SIDECARS)
LIBRISPEECH_TRANSCRIPTS = ".trans.txt"


def iter_folder(folder: Path, report: SkipReport) -> Iterator[ManifestRecord]:
    """The records of a LibriSpeech tree or an audio folder (module docstring), told apart by ``*.trans.txt``."""
    files = list(walk_files(folder, report))
    if any(file.name.endswith(LIBRISPEECH_TRANSCRIPTS) for file in files):
        yield from _iter_librispeech(folder, files, report)
    else:
        yield from _iter_audio_folder(folder, files, report)


def walk_files(folder: Path, report: SkipReport) -> Iterator[Path]:
    """The files below ``folder``, sorted by path, through symlinked folders; loops counted (docstring)."""
    real = folder.resolve()
    yield from _walk(folder, (real,), {real}, report)


def _walk(
    directory: Path, ancestors: tuple[Path, ...], visited: set[Path], report: SkipReport
) -> Iterator[Path]:
    with os.scandir(directory) as scan:
        entries = sorted((entry for entry in scan if not entry.name.startswith(".")), key=lambda e: e.name)
    for entry in entries:
        path = Path(entry.path)
        if entry.is_dir():  # follows symlinks
            real = path.resolve()
            if real in ancestors:
                report.seen += 1
                report.skip(
                    "symlink loop", str(path), f"links back to {real}, a folder it is in; not entered"
                )
            elif real in visited:
                report.seen += 1
                report.skip("folder linked twice", str(path), f"{real} was read through another path already")
            else:
                visited.add(real)
                yield from _walk(path, (*ancestors, real), visited, report)
        elif entry.is_file():
            yield path
        elif entry.is_symlink() and not path.exists():
            report.seen += 1
            report.skip("broken symlink", str(path), f"points to {os.readlink(path)}, which does not exist")
        else:  # a FIFO, a device or a socket (or a link to one): never opened, reading it could block
            report.seen += 1
            report.skip(NOT_REGULAR, str(path), f"{file_kind(entry.stat().st_mode)}; not opened")


# --- LibriSpeech -----------------------------------------------------------------------------------------


def _iter_librispeech(root: Path, files: list[Path], report: SkipReport) -> Iterator[ManifestRecord]:
    audio_by_key: dict[tuple[Path, str], Path] = {}
    duplicates: list[Path] = []
    for file in files:
        if file.suffix.lower() in AUDIO_EXTENSIONS:
            key = (file.parent, file.stem)
            if audio_by_key.setdefault(key, file) != file:
                duplicates.append(file)
    claimed: set[Path] = set()
    for transcripts in (file for file in files if file.name.endswith(LIBRISPEECH_TRANSCRIPTS)):
        for number, line in iter_decoded_lines(transcripts, report):
            report.seen += 1
            location = f"{transcripts}:{number}"
            utt_id, text = (*line.split(maxsplit=1), "")[:2]
            audio = audio_by_key.get((transcripts.parent, utt_id))
            if audio is None:
                report.skip(
                    "missing audio", location, f"no {utt_id}.flac (or other audio) in {transcripts.parent}"
                )
                continue
            claimed.add(audio)
            yield ManifestRecord(
                id=utt_id, location=location, audio_path=str(audio), text=text.strip(), source=str(root)
            )
    for audio in duplicates:
        report.seen += 1
        first = audio_by_key[(audio.parent, audio.stem)]
        report.skip("duplicate id", str(audio), f"{first.name} is already the audio of this utterance")
    for audio in (file for file in audio_by_key.values() if file not in claimed):
        report.seen += 1
        report.skip("no transcript", str(audio), f"no *{LIBRISPEECH_TRANSCRIPTS} line in its folder names it")


# --- audio folders ---------------------------------------------------------------------------------------


def _iter_audio_folder(folder: Path, files: list[Path], report: SkipReport) -> Iterator[ManifestRecord]:
    ids = DefaultIds()
    for file in files:
        suffix = file.suffix.lower()
        if suffix in AUDIO_EXTENSIONS:
            relative = file.relative_to(folder)
            base = str(relative.with_suffix("")).replace("/", "__")
            record = _audio_record(file, ids.for_file(str(relative), base), folder, report)
            if record is not None:
                yield record
        elif suffix not in SIDECARS:
            report.seen += 1
            report.skip(
                "unsupported extension",
                str(file),
                f"not audio ({', '.join(AUDIO_EXTENSIONS)}) nor a sidecar ({', '.join(SIDECARS)}); "
                "convert it or move it out of the folder",
            )


def _audio_record(audio: Path, utt_id: str, folder: Path, report: SkipReport) -> ManifestRecord | None:
    """The record of one audio file with its sidecars; None (counted) when a sidecar is unreadable."""
    report.seen += 1
    text_file = _sidecar(audio, TEXT_SIDECARS)
    token_file = _sidecar(audio, TOKEN_SIDECARS)
    frame_file = _sidecar(audio, FRAME_SIDECARS)
    try:
        text = text_file.read_text(encoding="utf-8-sig").strip() if text_file else None
        tokens = parse_tokens(token_file.read_text(encoding="utf-8-sig")) if token_file else None
    except UnicodeDecodeError as error:
        report.skip("invalid UTF-8 in sidecar", str(text_file or token_file), str(error))
        return None
    except ValueError as error:
        report.skip("invalid tokens", str(token_file), str(error))
        return None
    try:
        hint = frame_file.read_text(encoding="utf-8-sig").strip() if frame_file else None
        rows = parse_dimension(hint, "frame count")
    except (UnicodeDecodeError, ValueError) as error:
        report.skip("invalid frame count", str(frame_file), f"{error}; expected one positive integer")
        return None
    return ManifestRecord(
        id=utt_id,
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
