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
from pathlib import Path

import numpy as np
import soundfile

from asr_pipeline.io.audio import (
    FFMPEG_ONLY_EXTENSIONS,
    TRUNCATION_TOLERANCE,
    AudioDecodeError,
    load_audio,
)

MAX_OVERSHOOT_SEC = 0.5  # Kaldi extract-segments' --max-overshoot default


def load_audio_segment(
    source: str | Path | bytes,
    sample_rate: int = 16000,
    offset_sec: float | None = None,
    duration_sec: float | None = None,
    name: str | None = None,
) -> np.ndarray:
    """Mono float32 (N,) at ``sample_rate`` of ``source`` from ``offset_sec`` for ``duration_sec``.

    Both None: the whole audio, exactly ``load_audio``. ``duration_sec`` None: to the end. Raises
    ``AudioDecodeError`` as ``load_audio`` does, and with reason ``segment outside the audio`` or
    ``invalid segment``.
    """
    if offset_sec is None and duration_sec is None:
        return load_audio(source, sample_rate, name)
    base = name or ("<audio bytes>" if isinstance(source, bytes) else str(source))
    end = "the end" if duration_sec is None else f"{(offset_sec or 0.0) + duration_sec:g} s"
    label = f"{base} [{offset_sec or 0.0:g} s to {end}]"
    _check_segment(offset_sec, duration_sec, label)
    if not isinstance(source, bytes):
        path = Path(source)
        if path.suffix.lower() not in FFMPEG_ONLY_EXTENSIONS and path.is_file():
            try:
                return _load_seeked(path, sample_rate, offset_sec, duration_sec, label)
            except (soundfile.LibsndfileError, RuntimeError, TypeError):
                pass  # libsndfile cannot read it: decoded whole below, where load_audio tries ffmpeg
    waveform = load_audio(source, sample_rate, name)  # (N,)
    start, stop = segment_bounds(len(waveform), sample_rate, offset_sec, duration_sec, label)
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


def _check_segment(offset_sec: float | None, duration_sec: float | None, label: str) -> None:
    offset_ok = offset_sec is None or (math.isfinite(offset_sec) and offset_sec >= 0)
    duration_ok = duration_sec is None or (math.isfinite(duration_sec) and duration_sec > 0)
    if not (offset_ok and duration_ok):
        raise AudioDecodeError(
            f"{label}: invalid segment (offset_sec={offset_sec}, duration_sec={duration_sec}); expected "
            "offset_sec >= 0 and duration_sec > 0",
            "invalid segment",
        )


def _load_seeked(
    path: Path, sample_rate: int, offset_sec: float | None, duration_sec: float | None, label: str
) -> np.ndarray:
    with soundfile.SoundFile(str(path)) as sound:
        if not sound.seekable():
            raise RuntimeError("not seekable")
        rate, total = sound.samplerate, sound.frames
        start, stop = segment_bounds(total, rate, offset_sec, duration_sec, label)
        sound.seek(start)
        data = sound.read(stop - start, dtype="float32", always_2d=True)  # (n, C)
    # An MP3's frame count is an estimate for files without a Xing/Info header (as in io/audio.py).
    if len(data) < (stop - start) - TRUNCATION_TOLERANCE * total:
        raise AudioDecodeError(
            f"{label}: truncated audio (the header declares {total} frames, the segment ends at frame "
            f"{stop}, only {start + len(data)} decode)",
            "truncated audio",
        )
    # Back through load_audio, as an exact float WAV at the file's rate: it mixes to mono, resamples and
    # checks the samples the same way for a segment as for a whole file.
    buffer = io.BytesIO()
    soundfile.write(buffer, data, rate, format="WAV", subtype="FLOAT")
    return load_audio(buffer.getvalue(), sample_rate, name=label)
