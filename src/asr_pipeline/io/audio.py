"""Audio decoding to mono float32 at a target rate.

Checked on this project's setup (libsndfile 1.2.2, Debian ffmpeg 5.1): libsndfile (via soundfile) decodes
WAV, FLAC, MP3, Ogg Vorbis and Ogg Opus in-process, from files and from bytes; it refuses M4A, raw AAC
(ADTS) and WebM, which go straight to the ffmpeg command line. Anything else libsndfile refuses is retried
with ffmpeg too. Truncation is detected where the format allows it (a WAV data chunk or an MP3 frame count
longer than what decodes, ffmpeg decode errors); silent audio is decoded like any other, the caller decides.
"""

from __future__ import annotations

import functools
import io
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import soundfile

AUDIO_EXTENSIONS = (".wav", ".flac", ".mp3", ".ogg", ".opus", ".m4a", ".aac", ".webm")
# Containers libsndfile cannot open: skip the in-process attempt and go to ffmpeg.
FFMPEG_ONLY_EXTENSIONS = (".m4a", ".aac", ".webm")
# An MP3's header-declared frame count is an estimate for files without a Xing/Info header; only a
# shortfall beyond this fraction is called truncation.
TRUNCATION_TOLERANCE = 0.02
# libsndfile notes a WAV whose data chunk is longer than the file as "data : 176400 (should be 88161)".
_WAV_TRUNCATED = re.compile(r"^data\s*:.*should be", re.MULTILINE)


class AudioDecodeError(ValueError):
    """The audio could not be decoded; the message names the source.

    ``reason`` is the short key a skip report counts it under; the message carries the detail.
    """

    def __init__(self, message: str, reason: str = "undecodable audio") -> None:
        super().__init__(message)
        self.reason = reason


def load_audio(source: str | Path | bytes, sample_rate: int = 16000, name: str | None = None) -> np.ndarray:
    """Decode ``source`` (a path or encoded bytes) to mono float32 in [-1, 1] at ``sample_rate``.

    Returns a 1-D array (N,). ``name`` labels byte sources in error messages (and its suffix, when it has
    one, routes bytes like a file of that name).
    """
    label = name or (str(source) if not isinstance(source, bytes) else "<audio bytes>")
    if isinstance(source, bytes):
        if not source:
            raise AudioDecodeError(f"{label}: audio is empty (0 bytes)", "empty audio")
        suffix = Path(name).suffix.lower() if name else ""
    else:
        path = Path(source)
        if not path.is_file():
            raise AudioDecodeError(f"{label}: audio file not found", "missing file")
        if path.stat().st_size == 0:
            raise AudioDecodeError(f"{label}: audio file is empty (0 bytes)", "empty audio")
        suffix = path.suffix.lower()
    if suffix in FFMPEG_ONLY_EXTENSIONS:
        data, rate = _decode_ffmpeg_or_raise(source, sample_rate, label, suffix, "")
    else:
        try:
            data, rate = _decode_soundfile(source, label)
        except (soundfile.LibsndfileError, RuntimeError, TypeError) as sf_error:
            # One line: libsndfile messages about byte streams can span several.
            previous = " ".join(str(sf_error).split())
            data, rate = _decode_ffmpeg_or_raise(source, sample_rate, label, suffix, f"{previous}; ")
    if data.size == 0:
        raise AudioDecodeError(f"{label}: audio has no samples (truncated or empty stream)", "empty audio")
    mono = data.mean(axis=1) if data.ndim == 2 else data  # (N, C) -> (N,)
    if rate != sample_rate:
        # Imported here so that reading manifests (which only needs AUDIO_EXTENSIONS) does not load torch.
        import torch

        samples = torch.from_numpy(np.ascontiguousarray(mono, dtype=np.float32))
        mono = _resampler(rate, sample_rate)(samples).numpy()
    return np.ascontiguousarray(mono, dtype=np.float32)


@functools.lru_cache(maxsize=16)
def _resampler(orig_rate: int, new_rate: int):  # -> io.resample.PolyphaseResampler
    """torchaudio's windowed-sinc resampler, its kernel built once per rate pair and applied as small
    matrix products (io/resample.py: 8x faster than ``torchaudio.functional.resample`` on a real corpus)."""
    from asr_pipeline.io.resample import PolyphaseResampler

    return PolyphaseResampler(orig_rate, new_rate)


def _decode_soundfile(source: str | Path | bytes, label: str) -> tuple[np.ndarray, int]:
    handle = io.BytesIO(source) if isinstance(source, bytes) else str(source)
    with soundfile.SoundFile(handle) as sound:
        declared = sound.frames
        log = sound.extra_info
        data = sound.read(dtype="float32", always_2d=False)
        rate = sound.samplerate
    if _WAV_TRUNCATED.search(log):
        raise AudioDecodeError(
            f"{label}: truncated WAV (the header declares more audio than the file holds)", "truncated audio"
        )
    if declared > 0 and len(data) < declared * (1 - TRUNCATION_TOLERANCE):
        raise AudioDecodeError(
            f"{label}: truncated audio (the header declares {declared} frames, only {len(data)} decode)",
            "truncated audio",
        )
    return data, rate


def _decode_ffmpeg_or_raise(
    source: str | Path | bytes, sample_rate: int, label: str, suffix: str, previous: str
) -> tuple[np.ndarray, int]:
    try:
        return _decode_ffmpeg(source, sample_rate, suffix)
    except AudioDecodeError as ff_error:
        raise AudioDecodeError(
            f"{label}: cannot decode audio ({previous}{ff_error}). Check that the file is complete and "
            f"in one of {', '.join(AUDIO_EXTENSIONS)}"
        ) from None


def _decode_ffmpeg(source: str | Path | bytes, sample_rate: int, suffix: str) -> tuple[np.ndarray, int]:
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        raise AudioDecodeError("ffmpeg is not installed (run `make setup`)")
    if not isinstance(source, bytes):
        return _run_ffmpeg(ffmpeg, str(source), sample_rate)
    # Bytes go through a temporary file, not a pipe: MP4/M4A keeps its index (the moov atom) at the end of
    # the file unless written with +faststart, and ffmpeg cannot seek back in a pipe. Measured here: a 60 s
    # M4A from stdin decodes to 0 samples, from a file to all of them. Writing a few MB to /tmp costs far
    # less than the ffmpeg process start it accompanies.
    with tempfile.NamedTemporaryFile(suffix=suffix or ".audio") as tmp:
        tmp.write(source)
        tmp.flush()
        return _run_ffmpeg(ffmpeg, tmp.name, sample_rate)


def _run_ffmpeg(ffmpeg: str, input_path: str, sample_rate: int) -> tuple[np.ndarray, int]:
    # -xerror stops on the first decode error (truncated FLAC/WAV/AAC would otherwise decode partially
    # with exit status 0); at -v error anything on stderr is an error (a truncated WebM only logs one).
    command = [ffmpeg, "-nostdin", "-v", "error", "-xerror", "-i", input_path]
    command += ["-ac", "1", "-ar", str(sample_rate), "-f", "f32le", "pipe:1"]
    result = subprocess.run(command, capture_output=True, check=False)
    # Joined into one line: the message ends up in a one-line error or skip-report entry.
    stderr = " ".join(result.stderr.decode(errors="replace").replace(input_path, "<input>").split())
    if result.returncode != 0 or stderr:
        raise AudioDecodeError(f"ffmpeg: {stderr[-300:] or f'exit status {result.returncode}'}")
    return np.frombuffer(result.stdout, dtype=np.float32).copy(), sample_rate
