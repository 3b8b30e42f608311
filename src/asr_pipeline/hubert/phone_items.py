"""Phone alignments of a split whose manifest names each utterance's espeak-ng voice (the demo corpus's dev
and test JSONL: ``speaker``, ``rate_wpm``, ``pitch``), for HuBERT's unit quality (phone purity, PNMI) and
ABX item files.

The alignments come from the synthesizer itself (``demo.phones``): each utterance is synthesized again through
libespeak-ng in a fresh process, its samples are checked against the corpus's file (an utterance whose audio
differs is a counted skip, never a guessed alignment), and the phoneme events give the boundaries.

The item file is the Libri-light / ZeroSpeech ABX format that ``fastabx`` reads: a header
``#file onset offset #phone prev-phone next-phone speaker`` and one line per phone (times in seconds, pauses
left out; a neighbour that is a pause or the utterance's edge is ``SIL``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from asr_pipeline.demo.phones import PhoneAlignment, align_utterances
from asr_pipeline.demo.synthesis import Voice
from asr_pipeline.io.report import SkipReport

ITEM_HEADER = "#file onset offset #phone prev-phone next-phone speaker"
SILENCE = "SIL"
FRAME_SECONDS = 0.02  # the model's label rate (50 Hz), as the units


@dataclass(frozen=True)
class VoicedUtterance:
    id: str
    audio_path: Path
    text: str
    voice: Voice
    location: str  # manifest:line, for messages

    @property
    def speaker(self) -> str:
        return self.voice.espeak_name


def voice_from(speaker: str, rate_wpm: int, pitch: int) -> Voice:
    """The ``Voice`` an espeak-ng name (``en-us`` or ``en-us+m3``) with rate and pitch stands for."""
    name, _, variant = speaker.partition("+")
    return Voice(name, variant or None, int(rate_wpm), int(pitch))


def voiced_utterances(manifest: Path, report: SkipReport) -> list[VoicedUtterance]:
    """The JSONL manifest's rows that name their voice; others are counted ("no espeak voice"). Counts every
    row as seen; ``align_split`` counts the kept ones."""
    rows = []
    for number, line in enumerate(Path(manifest).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        location = f"{manifest}:{number}"
        report.seen += 1
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            report.skip("unreadable row", location, str(error))
            continue
        if not all(
            isinstance(row.get(key), str) for key in ("id", "audio_path", "text", "speaker")
        ) or not all(isinstance(row.get(key), int) for key in ("rate_wpm", "pitch")):
            report.skip(
                "no espeak voice", location, "needs id, audio_path, text, speaker, rate_wpm and pitch"
            )
            continue
        voice = voice_from(row["speaker"], row["rate_wpm"], row["pitch"])
        audio = Path(manifest).parent / row["audio_path"]
        rows.append(VoicedUtterance(row["id"], audio, row["text"], voice, location))
    return rows


def align_split(
    utterances: Sequence[VoicedUtterance], report: SkipReport, jobs: int = 1
) -> dict[str, PhoneAlignment]:
    """The phone alignment of every utterance whose file is exactly its resynthesis (others are counted)."""
    aligned = {}
    requests = [(u.text, u.voice) for u in utterances]
    for utterance, alignment in zip(utterances, align_utterances(requests, jobs), strict=True):
        try:
            audio, rate = sf.read(utterance.audio_path, dtype="int16")
        except (OSError, RuntimeError) as error:
            report.skip("unreadable audio", utterance.location, f"{utterance.audio_path}: {error}")
            continue
        if rate != alignment.sample_rate or audio.ndim != 1 or not alignment.matches(audio):
            report.skip(
                "audio differs from its resynthesis",
                utterance.location,
                f"{utterance.audio_path} ({len(audio)} samples at {rate} Hz) is not what espeak-ng says for "
                f"{utterance.speaker} at {utterance.voice.rate_wpm} wpm, pitch {utterance.voice.pitch}",
            )
            continue
        aligned[utterance.id] = alignment
        report.kept += 1
    return aligned


def align_manifest(
    manifest: Path, report: SkipReport, jobs: int = 1
) -> tuple[list[VoicedUtterance], dict[str, PhoneAlignment]]:
    """The voiced rows of a raw JSONL manifest and the phone alignment of each whose audio is its resynthesis
    (``voiced_utterances`` then ``align_split``); another kind of manifest names no voices: none."""
    utterances = voiced_utterances(manifest, report) if Path(manifest).suffix == ".jsonl" else []
    return utterances, (align_split(utterances, report, jobs) if utterances else {})


def covers_a_frame(onset: float, offset: float, frequency: int) -> bool:
    """Whether [onset, offset) s holds a frame centre at ``frequency`` Hz (fastabx's rule for which frames a
    phone takes: a phone with none cannot be scored, and fastabx refuses the whole item file)."""
    return math.floor(offset * frequency - 0.5) + 1 > math.ceil(onset * frequency - 0.5)


def item_lines(
    alignments: Mapping[str, PhoneAlignment], speakers: Mapping[str, str], frequency: int = 50
) -> list[str]:
    """The ABX item file's lines (header first): every phone that is not a pause and holds a frame at
    ``frequency`` Hz (the model's 50 Hz; shorter phones are left out), with its neighbours."""
    lines = [ITEM_HEADER]
    for utterance in sorted(alignments):
        alignment = alignments[utterance]
        segments = alignment.segments
        for i, segment in enumerate(segments):
            if segment.is_pause:
                continue
            previous = _name(segments[i - 1]) if i > 0 else SILENCE
            following = _name(segments[i + 1]) if i + 1 < len(segments) else SILENCE
            onset = round(segment.start / alignment.sample_rate, 4)  # as written: fastabx reads these
            offset = round(segment.end / alignment.sample_rate, 4)
            if not covers_a_frame(onset, offset, frequency):
                continue
            lines.append(
                f"{utterance} {onset:.4f} {offset:.4f} {segment.phone} {previous} {following} {speakers[utterance]}"
            )
    return lines


def frame_phones(
    alignments: Mapping[str, PhoneAlignment],
    inventory: Mapping[str, int],
    frame_seconds: float = FRAME_SECONDS,
) -> dict[str, np.ndarray]:
    """Per utterance the phone index at the centre of each ``frame_seconds`` frame (-1: a pause, or past
    the last phone), for unit purity and PNMI against 50 Hz units."""
    labels = {}
    for utterance, alignment in alignments.items():
        frames = int(alignment.samples / alignment.sample_rate / frame_seconds)
        centres = ((np.arange(frames) + 0.5) * frame_seconds * alignment.sample_rate).astype(np.int64)
        row = np.full(frames, -1, dtype=np.int64)
        for segment in alignment.segments:
            if not segment.is_pause:
                row[(centres >= segment.start) & (centres < segment.end)] = inventory[segment.phone]
        labels[utterance] = row
    return labels


def phone_inventory(alignments: Iterable[PhoneAlignment]) -> dict[str, int]:
    """Every non-pause phone, numbered in sorted order."""
    names = {s.phone for a in alignments for s in a.segments if not s.is_pause}
    return {name: index for index, name in enumerate(sorted(names))}


def summary(alignments: Mapping[str, PhoneAlignment], inventory: Mapping[str, int]) -> dict[str, Any]:
    phones = [s for a in alignments.values() for s in a.segments if not s.is_pause]
    seconds = [
        (s.end - s.start) / a.sample_rate for a in alignments.values() for s in a.segments if not s.is_pause
    ]
    return {
        "utterances": len(alignments),
        "phones": len(phones),
        "inventory": len(inventory),
        "mean_phone_ms": 1000 * float(np.mean(seconds)) if seconds else 0.0,
    }


def _name(segment) -> str:
    return SILENCE if segment.is_pause else segment.phone


__all__ = [
    "ITEM_HEADER",
    "SILENCE",
    "VoicedUtterance",
    "align_manifest",
    "align_split",
    "covers_a_frame",
    "frame_phones",
    "item_lines",
    "phone_inventory",
    "summary",
    "voice_from",
    "voiced_utterances",
]
