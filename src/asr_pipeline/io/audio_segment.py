"""Decode a record's audio: the whole file, or the utterance a Kaldi ``segments`` line cuts out of it.

``load_audio_segment`` is the one place a record's ``offset_sec``/``duration_sec`` are applied; callers that
decode record audio (the features stage, the on-the-fly audio dataset) call it instead of ``load_audio``.
Cutting follows Kaldi's ``extract-segments``: a segment ending at most ``MAX_OVERSHOOT_SEC`` past the end
of the recording is truncated to it, one ending later (or starting after the end) is an error.

A file libsndfile reads is seeked, and only the segment is decoded: a one-hour recording cut into 700
utterances is then read once in all, not 700 times. Other sources (ffmpeg-only containers, bytes) are
decoded whole and sliced at the target rate.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile

from asr_pipeline.io.audio import (
    FFMPEG_ONLY_EXTENSIONS,
    TRUNCATION_TOLERANCE,
    AudioDecodeError,
    AudioTooLongError,
    load_audio,
)

MAX_OVERSHOOT_SEC = 0.5  # Kaldi extract-segments' --max-overshoot default


def load_audio_segment(
    source: str | Path | bytes,
    sample_rate: int = 16000,
    offset_sec: float | None = None,
    duration_sec: float | None = None,
    name: str | None = None,
    max_duration_sec: float | None = None,
) -> np.ndarray:
    """Mono float32 (N,) at ``sample_rate`` of ``source`` from ``offset_sec`` for ``duration_sec``.

    Both None: the whole audio, exactly ``load_audio``. ``duration_sec`` None: to the end. Raises
    ``AudioDecodeError`` as ``load_audio`` does (``AudioTooLongError`` when the segment, not the recording,
    is longer than ``max_duration_sec``), and with reason ``segment outside the audio`` or ``invalid
    segment``.
    """
    if offset_sec is None and duration_sec is None:
        return load_audio(source, sample_rate, name, max_duration_sec)
    base = name or ("<audio bytes>" if isinstance(source, bytes) else str(source))
    segment = _Segment(offset_sec or 0.0, duration_sec, base, max_duration_sec)
    if not isinstance(source, bytes):
        path = Path(source)
        if path.suffix.lower() not in FFMPEG_ONLY_EXTENSIONS and path.is_file():
            try:
                return _load_seeked(path, sample_rate, segment)
            except (soundfile.LibsndfileError, RuntimeError, TypeError):
                pass  # libsndfile cannot read it: decoded whole below, where load_audio tries ffmpeg
    waveform = load_audio(source, sample_rate, name)  # (N,) the whole recording: no length limit
    start, stop = segment.bounds(len(waveform), sample_rate)
    return waveform[start:stop]


def segment_bounds(
    total_frames: int, rate: int, offset_sec: float | None, duration_sec: float | None, label: str = "audio"
) -> tuple[int, int]:
    """[start, stop) frame indexes of a segment of audio ``total_frames`` long at ``rate`` (module docstring).

    Also what a planner needs to know a segment's length without decoding: ``stop - start`` frames.
    """
    start = round((offset_sec or 0.0) * rate)
    stop = total_frames if duration_sec is None else start + round(duration_sec * rate)
    if start >= total_frames or stop - total_frames > round(MAX_OVERSHOOT_SEC * rate):
        raise AudioDecodeError(
            f"{label}: the segment lies outside the audio, which is {total_frames / rate:.3f} s long; "
            "fix the segments file",
            "segment outside the audio",
        )
    return start, min(stop, total_frames)


@dataclass(frozen=True)
class _Segment:
    offset_sec: float
    duration_sec: float | None  # None: to the end
    source: str  # for messages
    max_duration_sec: float | None

    def __post_init__(self) -> None:
        offset_ok = math.isfinite(self.offset_sec) and self.offset_sec >= 0
        duration = self.duration_sec
        if not offset_ok or (duration is not None and not (math.isfinite(duration) and duration > 0)):
            raise AudioDecodeError(
                f"{self.label}: invalid segment (offset_sec={self.offset_sec}, duration_sec={duration}); "
                "expected offset_sec >= 0 and duration_sec > 0",
                "invalid segment",
            )

    @property
    def label(self) -> str:
        end = "the end" if self.duration_sec is None else f"{self.offset_sec + self.duration_sec:g} s"
        return f"{self.source} [{self.offset_sec:g} s to {end}]"

    def bounds(self, total_frames: int, rate: int) -> tuple[int, int]:
        """``segment_bounds``, and ``AudioTooLongError`` past ``max_duration_sec`` (before any decoding)."""
        start, stop = segment_bounds(total_frames, rate, self.offset_sec, self.duration_sec, self.label)
        if self.max_duration_sec is not None and stop - start > self.max_duration_sec * rate:
            duration_ms = round(1000 * (stop - start) / rate)
            raise AudioTooLongError(
                f"{self.label}: the segment lasts {duration_ms} ms, longer than the "
                f"{self.max_duration_sec:g} s allowed (max_audio_duration_sec)",
                duration_ms,
            )
        return start, stop


def _load_seeked(path: Path, sample_rate: int, segment: _Segment) -> np.ndarray:
    with soundfile.SoundFile(str(path)) as sound:
        if not sound.seekable():
            raise RuntimeError("not seekable")
        rate, total = sound.samplerate, sound.frames
        start, stop = segment.bounds(total, rate)
        sound.seek(start)
        data = sound.read(stop - start, dtype="float32", always_2d=True)  # (n, C)
    # An MP3's frame count is an estimate for files without a Xing/Info header (as in io/audio.py).
    if len(data) < (stop - start) - TRUNCATION_TOLERANCE * total:
        raise AudioDecodeError(
            f"{segment.label}: truncated audio (the header declares {total} frames, the segment ends at "
            f"frame {stop}, only {start + len(data)} decode)",
            "truncated audio",
        )
    # Back through load_audio, as an exact float WAV at the file's rate: it mixes to mono, resamples and
    # checks the samples the same way for a segment as for a whole file.
    buffer = io.BytesIO()
    soundfile.write(buffer, data, rate, format="WAV", subtype="FLOAT")
    return load_audio(buffer.getvalue(), sample_rate, segment.label)
