"""Audio decoding to mono float32 at a target rate.

Checked on this project's setup (libsndfile 1.2.2, Debian ffmpeg 5.1): libsndfile (via soundfile) decodes
WAV, FLAC, MP3, Ogg Vorbis and Ogg Opus in-process, from files and from bytes; it refuses M4A, raw AAC
(ADTS) and WebM, which go straight to the ffmpeg command line. Anything else libsndfile refuses is retried
with ffmpeg too. Truncation is detected where the format allows it (a WAV data chunk or an MP3 frame count
longer than what decodes, ffmpeg decode errors); silent audio is decoded like any other, the caller decides.
NaN/Inf samples (possible in float WAV/FLAC) are refused here, once for every caller: they would become NaN
features and NaN losses downstream.

``max_duration_sec`` is checked before decoding wherever it can be: libsndfile formats declare their length
in the header (an estimate for MP3 without a Xing/Info header), so a 40-minute 44.1 kHz file is refused
without decoding and resampling it (2.6 GB of float32 on the way); ffmpeg formats are decoded for at most
that long plus one sample (``-t``), which bounds memory and time the same way.
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

# .sph: NIST SPHERE (LDC corpora), PCM read by libsndfile; shorten-compressed SPHERE is not (convert it).
AUDIO_EXTENSIONS = (".wav", ".flac", ".mp3", ".ogg", ".opus", ".sph", ".m4a", ".aac", ".webm")
# Containers libsndfile cannot open: skip the in-process attempt and go to ffmpeg.
FFMPEG_ONLY_EXTENSIONS = (".m4a", ".aac", ".webm")
# An MP3's header-declared frame count is an estimate for files without a Xing/Info header; only a
# shortfall beyond this fraction is called truncation.
TRUNCATION_TOLERANCE = 0.02
# libsndfile notes a WAV whose data chunk is longer than the file as "data : 176400 (should be 88161)".
_WAV_TRUNCATED = re.compile(r"^data\s*:.*should be", re.MULTILINE)
# Skip-report reasons of load_audio's own checks (AudioDecodeError.reason).
TOO_LONG = "longer than max_audio_duration_sec"
NON_FINITE = "non-finite audio samples"


class AudioDecodeError(ValueError):
    """The audio could not be decoded; the message names the source.

    ``reason`` is the short key a skip report counts it under; the message carries the detail.
    """

    def __init__(self, message: str, reason: str = "undecodable audio") -> None:
        super().__init__(message)
        self.reason = reason


class AudioTooLongError(AudioDecodeError):
    """Longer than the ``max_duration_sec`` given to ``load_audio``; ``duration_ms`` is its length (from the
    header when known before decoding) or, for ffmpeg formats, the most that was decoded (a lower bound)."""

    def __init__(self, message: str, duration_ms: int) -> None:
        super().__init__(message, TOO_LONG)
        self.duration_ms = duration_ms


def load_audio(
    source: str | Path | bytes,
    sample_rate: int = 16000,
    name: str | None = None,
    max_duration_sec: float | None = None,
) -> np.ndarray:
    """Decode ``source`` (a path or encoded bytes) to mono float32 in [-1, 1] at ``sample_rate``.

    Returns a 1-D array (N,). ``name`` labels byte sources in error messages (and its suffix, when it has
    one, routes bytes like a file of that name). Raises ``AudioDecodeError`` (its ``reason`` a skip-report
    key), ``AudioTooLongError`` past ``max_duration_sec`` (None: no limit), before decoding where the header
    tells (module docstring).
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
        data, rate = _decode_ffmpeg_or_raise(source, sample_rate, label, suffix, "", max_duration_sec)
    else:
        try:
            data, rate = _decode_soundfile(source, label, max_duration_sec)
        except (soundfile.LibsndfileError, RuntimeError, TypeError) as sf_error:
            # One line: libsndfile messages about byte streams can span several.
            previous = " ".join(str(sf_error).split())
            data, rate = _decode_ffmpeg_or_raise(
                source, sample_rate, label, suffix, f"{previous}; ", max_duration_sec
            )
    if data.size == 0:
        raise AudioDecodeError(f"{label}: audio has no samples (truncated or empty stream)", "empty audio")
    _check_finite(data, rate, label)
    _check_duration(len(data), rate, max_duration_sec, label, from_header=False)
    mono = data.mean(axis=1) if data.ndim == 2 else data  # (N, C) -> (N,)
    if rate != sample_rate:
        # Imported here so that reading manifests (which only needs AUDIO_EXTENSIONS) does not load torch.
        import torch

        samples = torch.from_numpy(np.ascontiguousarray(mono, dtype=np.float32))
        mono = _resampler(rate, sample_rate)(samples).numpy()
    return np.ascontiguousarray(mono, dtype=np.float32)


def _check_finite(data: np.ndarray, rate: int, label: str) -> None:
    """Refuse NaN/Inf samples (``data``: (N,) or (N, C)), naming the first one's time."""
    finite = np.isfinite(data)
    if finite.all():
        return
    first = int(np.flatnonzero(~finite.reshape(len(data), -1).all(axis=1))[0])
    raise AudioDecodeError(
        f"{label}: sample {first} ({first / rate:.3f} s) is NaN or Inf; the recording is corrupt: "
        "re-export it (or drop it from the manifest)",
        NON_FINITE,
    )


def _check_duration(
    frames: int, rate: int, max_duration_sec: float | None, label: str, from_header: bool
) -> None:
    """AudioTooLongError when ``frames`` at ``rate`` (declared by the header, or decoded) last longer than
    ``max_duration_sec``."""
    if max_duration_sec is None or rate <= 0 or frames <= max_duration_sec * rate:
        return
    duration_ms = round(1000 * frames / rate)
    # ffmpeg formats are decoded only up to the limit, so a decoded length is a lower bound.
    length = f"the header declares {duration_ms} ms" if from_header else f"at least {duration_ms} ms decoded"
    raise AudioTooLongError(
        f"{label}: {length}, longer than the {max_duration_sec:g} s allowed (max_audio_duration_sec)",
        duration_ms,
    )


@functools.lru_cache(maxsize=16)
def _resampler(orig_rate: int, new_rate: int):  # -> io.resample.PolyphaseResampler
    """torchaudio's windowed-sinc resampler, its kernel built once per rate pair and applied as small
    matrix products (io/resample.py: 8x faster than ``torchaudio.functional.resample`` on a real corpus)."""
    from asr_pipeline.io.resample import PolyphaseResampler

    return PolyphaseResampler(orig_rate, new_rate)


def _decode_soundfile(
    source: str | Path | bytes, label: str, max_duration_sec: float | None = None
) -> tuple[np.ndarray, int]:
    handle = io.BytesIO(source) if isinstance(source, bytes) else str(source)
    with soundfile.SoundFile(handle) as sound:
        declared, rate = sound.frames, sound.samplerate
        if _WAV_TRUNCATED.search(sound.extra_info):  # its declared length is not the real one
            raise AudioDecodeError(
                f"{label}: truncated WAV (the header declares more audio than the file holds)",
                "truncated audio",
            )
        _check_duration(declared, rate, max_duration_sec, label, from_header=True)  # before decoding
        data = sound.read(dtype="float32", always_2d=False)
    if declared > 0 and len(data) < declared * (1 - TRUNCATION_TOLERANCE):
        raise AudioDecodeError(
            f"{label}: truncated audio (the header declares {declared} frames, only {len(data)} decode)",
            "truncated audio",
        )
    return data, rate


def _decode_ffmpeg_or_raise(
    source: str | Path | bytes,
    sample_rate: int,
    label: str,
    suffix: str,
    previous: str,
    max_duration_sec: float | None = None,
) -> tuple[np.ndarray, int]:
    try:
        return _decode_ffmpeg(source, sample_rate, suffix, max_duration_sec)
    except AudioDecodeError as ff_error:
        raise AudioDecodeError(
            f"{label}: cannot decode audio ({previous}{ff_error}). Check that the file is complete and "
            f"in one of {', '.join(AUDIO_EXTENSIONS)}"
        ) from None


def _decode_ffmpeg(
    source: str | Path | bytes, sample_rate: int, suffix: str, max_duration_sec: float | None = None
) -> tuple[np.ndarray, int]:
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        raise AudioDecodeError("ffmpeg is not installed (run `make setup`)")
    if not isinstance(source, bytes):
        return _run_ffmpeg(ffmpeg, str(source), sample_rate, max_duration_sec)
    # Bytes go through a temporary file, not a pipe: MP4/M4A keeps its index (the moov atom) at the end of
    # the file unless written with +faststart, and ffmpeg cannot seek back in a pipe. Measured here: a 60 s
    # M4A from stdin decodes to 0 samples, from a file to all of them. Writing a few MB to /tmp costs far
    # less than the ffmpeg process start it accompanies.
    with tempfile.NamedTemporaryFile(suffix=suffix or ".audio") as tmp:
        tmp.write(source)
        tmp.flush()
        return _run_ffmpeg(ffmpeg, tmp.name, sample_rate, max_duration_sec)


def _run_ffmpeg(
    ffmpeg: str, input_path: str, sample_rate: int, max_duration_sec: float | None = None
) -> tuple[np.ndarray, int]:
    # -xerror stops on the first decode error (truncated FLAC/WAV/AAC would otherwise decode partially
    # with exit status 0); at -v error anything on stderr is an error (a truncated WebM only logs one).
    command = [ffmpeg, "-nostdin", "-v", "error", "-xerror", "-i", input_path]
    if max_duration_sec is not None:
        # No header length to trust here: decode at most one sample more than allowed, so a longer file
        # shows itself without being decoded whole (load_audio's duration check then refuses it).
        command += ["-t", f"{max_duration_sec + 1.0 / sample_rate:.6f}"]
    command += ["-ac", "1", "-ar", str(sample_rate), "-f", "f32le", "pipe:1"]
    result = subprocess.run(command, capture_output=True, check=False)
    # Joined into one line: the message ends up in a one-line error or skip-report entry.
    stderr = " ".join(result.stderr.decode(errors="replace").replace(input_path, "<input>").split())
    if result.returncode != 0 or stderr:
        raise AudioDecodeError(f"ffmpeg: {stderr[-300:] or f'exit status {result.returncode}'}")
    return np.frombuffer(result.stdout, dtype=np.float32).copy(), sample_rate
