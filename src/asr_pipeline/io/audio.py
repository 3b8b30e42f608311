"""Audio decoding to mono float32 at a target rate.

libsndfile (via soundfile) decodes WAV/FLAC/OGG/Opus/MP3 in-process and fast; anything it refuses
(m4a, aac, webm, odd codecs) goes through the ffmpeg command line, which setup installs from Debian.
"""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path

import numpy as np
import soundfile
import torch
import torchaudio.functional as AF

AUDIO_EXTENSIONS = (".wav", ".flac", ".mp3", ".ogg", ".opus", ".m4a", ".aac", ".webm")


class AudioDecodeError(ValueError):
    """The audio could not be decoded; the message names the source."""


def load_audio(source: str | Path | bytes, sample_rate: int = 16000, name: str | None = None) -> np.ndarray:
    """Decode ``source`` (a path or encoded bytes) to mono float32 in [-1, 1] at ``sample_rate``.

    Returns a 1-D array (N,). ``name`` labels byte sources in error messages.
    """
    label = name or (str(source) if not isinstance(source, bytes) else "<audio bytes>")
    if not isinstance(source, bytes):
        path = Path(source)
        if not path.is_file():
            raise AudioDecodeError(f"{label}: audio file not found")
        if path.stat().st_size == 0:
            raise AudioDecodeError(f"{label}: audio file is empty (0 bytes)")
    try:
        data, rate = _decode_soundfile(source)
    except (soundfile.LibsndfileError, RuntimeError, TypeError) as sf_error:
        try:
            data, rate = _decode_ffmpeg(source, sample_rate)
        except AudioDecodeError as ff_error:
            raise AudioDecodeError(f"{label}: cannot decode audio ({sf_error}; {ff_error})") from None
    if data.size == 0:
        raise AudioDecodeError(f"{label}: audio has no samples")
    mono = data.mean(axis=1) if data.ndim == 2 else data  # (N, C) -> (N,)
    if rate != sample_rate:
        mono = AF.resample(torch.from_numpy(np.ascontiguousarray(mono)), rate, sample_rate).numpy()
    return np.ascontiguousarray(mono, dtype=np.float32)


def _decode_soundfile(source: str | Path | bytes) -> tuple[np.ndarray, int]:
    handle = io.BytesIO(source) if isinstance(source, bytes) else str(source)
    data, rate = soundfile.read(handle, dtype="float32", always_2d=False)
    return data, rate


def _decode_ffmpeg(source: str | Path | bytes, sample_rate: int) -> tuple[np.ndarray, int]:
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        raise AudioDecodeError("ffmpeg is not installed (run `make setup`)")
    is_bytes = isinstance(source, bytes)
    command = [
        ffmpeg,
        "-nostdin",
        "-v",
        "error",
        "-i",
        "pipe:0" if is_bytes else str(source),
        "-ac",
        "1",
        "-ar",
        str(sample_rate),
        "-f",
        "f32le",
        "pipe:1",
    ]
    result = subprocess.run(command, input=source if is_bytes else None, capture_output=True, check=False)
    if result.returncode != 0:
        raise AudioDecodeError(f"ffmpeg: {result.stderr.decode(errors='replace').strip()[-300:]}")
    return np.frombuffer(result.stdout, dtype=np.float32).copy(), sample_rate
