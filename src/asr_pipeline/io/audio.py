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
that long plus one sample (``-t``), which bounds memory and time the same way. ``max_decoded_mb`` bounds
the float32 this process holds the same way: channels x frames from a libsndfile header (an 8-channel FLAC at
655,350 Hz is 683 KB on disk and 2.5 GB decoded), the mono output of ffmpeg.

ffmpeg never chooses the format itself: the content is sniffed (``sniff_container``) and only our audio
containers go to ffmpeg, with that demuxer named (``-f``) and only the ``file`` protocol allowed. Left to
probe, ffmpeg reads an HLS playlist (``#EXTM3U``, any file name) and decodes the files or URLs it names:
an uploaded 129-byte playlist made the web demo decode an mp3 elsewhere on the server. Playlists, concat
lists and anything else that is not audio are refused before ffmpeg starts.

Paths are checked before anything opens them: an empty path, a folder, a FIFO or a device each get their
own reason, and a FIFO or device is never opened (reading one blocks or never ends).
"""

from __future__ import annotations

import functools
import io
import os
import re
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass
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
OVER_BUDGET = "larger than max_decoded_mb"
NON_FINITE = "non-finite audio samples"
OUT_OF_RANGE = "float samples out of range"
NOT_AUDIO = "not a supported audio format"
EMPTY_PATH, A_DIRECTORY, NOT_REGULAR, MISSING = (
    "empty path",
    "a directory",
    "not a regular file",
    "missing file",
)
# Float audio may peak over full scale (headroom a float master keeps; lossy decoders overshoot a little);
# 4.0 is 12 dB over it. Integer-scale values stored as float (peaks in the hundreds or thousands) lie far
# beyond, and would reach the features 60-90 dB too loud.
MAX_FLOAT_PEAK = 4.0
# The demuxers ffmpeg may use, by the content's first bytes (``sniff_container``). None of them follows a
# reference to another file or URL (mov's external data references are off: ``-enable_drefs 0``).
FFMPEG_DEMUXERS = ("mov", "aac", "matroska", "wav", "flac", "ogg", "mp3")
_SNIFF_BYTES = 16


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
    max_decoded_mb: float | None = None,
) -> np.ndarray:
    """Decode ``source`` (a path or encoded bytes) to mono float32 in [-1, 1] at ``sample_rate``.

    Returns a 1-D array (N,). ``name`` labels byte sources in error messages (and its suffix, when it has
    one, routes bytes like a file of that name). Raises ``AudioDecodeError`` (its ``reason`` a skip-report
    key), ``AudioTooLongError`` past ``max_duration_sec``; past ``max_decoded_mb`` of decoded float32 the
    reason is ``OVER_BUDGET`` (None: no limit), both before decoding where the header tells (module
    docstring). Float samples beyond ``MAX_FLOAT_PEAK`` are refused (``OUT_OF_RANGE``).
    """
    label = name or (str(source) if not isinstance(source, bytes) else "<audio bytes>")
    limits = _Limits(max_duration_sec, max_decoded_mb)
    if isinstance(source, bytes):
        if not source:
            raise AudioDecodeError(f"{label}: audio is empty (0 bytes)", "empty audio")
        suffix = Path(name).suffix.lower() if name else ""
    else:
        check_audio_path(source, label)
        suffix = Path(source).suffix.lower()
    if suffix in FFMPEG_ONLY_EXTENSIONS:
        data, rate = _decode_ffmpeg_or_raise(source, sample_rate, label, suffix, "", limits)
    else:
        try:
            data, rate = _decode_soundfile(source, label, limits)
        except (soundfile.LibsndfileError, RuntimeError, TypeError) as sf_error:
            # One line: libsndfile messages about byte streams can span several.
            previous = " ".join(str(sf_error).split())
            data, rate = _decode_ffmpeg_or_raise(source, sample_rate, label, suffix, f"{previous}; ", limits)
    if data.size == 0:
        raise AudioDecodeError(f"{label}: audio has no samples (truncated or empty stream)", "empty audio")
    _check_finite(data, rate, label)
    _check_range(data, label)
    _check_duration(len(data), rate, max_duration_sec, label, from_header=False)
    mono = data.mean(axis=1) if data.ndim == 2 else data  # (N, C) -> (N,)
    if rate != sample_rate:
        # Imported here so that reading manifests (which only needs AUDIO_EXTENSIONS) does not load torch.
        import torch

        samples = torch.from_numpy(np.ascontiguousarray(mono, dtype=np.float32))
        mono = _resampler(rate, sample_rate)(samples).numpy()
    return np.ascontiguousarray(mono, dtype=np.float32)


def check_audio_path(source: str | Path, label: str | None = None) -> Path:
    """``source`` as a Path when it names a non-empty regular file (through symlinks), else
    ``AudioDecodeError`` with a reason that says what it names: an empty path (``Path("")`` would be the
    working folder), a directory, not a regular file (a FIFO, device or socket), a missing file. Only
    ``stat`` is used: a FIFO or a device is never opened."""
    label = label or str(source)
    if str(source) == "":
        raise AudioDecodeError('"": the audio path is empty; give the path of an audio file', EMPTY_PATH)
    path = Path(source)
    try:
        status = os.stat(path)  # through symlinks
    except FileNotFoundError:
        if path.is_symlink():
            target = os.readlink(path)
            raise AudioDecodeError(
                f"{label}: broken symlink (points to {target}, which does not exist)", MISSING
            ) from None
        raise AudioDecodeError(f"{label}: audio file not found", MISSING) from None
    except NotADirectoryError:
        raise AudioDecodeError(
            f"{label}: audio file not found (a folder on its path is a file)", MISSING
        ) from None
    except PermissionError:
        raise AudioDecodeError(
            f"{label}: permission denied; make the file readable", "unreadable file"
        ) from None
    mode = status.st_mode
    if stat.S_ISDIR(mode):
        raise AudioDecodeError(
            f"{label}: a directory, not an audio file; point it at an audio file",
            A_DIRECTORY,
        )
    if not stat.S_ISREG(mode):
        raise AudioDecodeError(
            f"{label}: {file_kind(mode)}, not a regular file; it is not opened (reading it could block or "
            "never end): save the audio to a file",
            NOT_REGULAR,
        )
    if status.st_size == 0:
        raise AudioDecodeError(f"{label}: audio file is empty (0 bytes)", "empty audio")
    return path


def file_kind(mode: int) -> str:
    """What a ``stat`` mode that is not a regular file or folder names, for messages."""
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "a socket" if stat.S_ISSOCK(mode) else "a special file"


@dataclass(frozen=True)
class _Limits:
    max_duration_sec: float | None = None
    max_decoded_mb: float | None = None

    def check_decoded_bytes(self, decoded_bytes: int, label: str, detail: str) -> None:
        """Refuse (``OVER_BUDGET``) ``decoded_bytes`` of float32 over ``max_decoded_mb``; ``detail`` says
        where the number comes from."""
        if self.max_decoded_mb is None or decoded_bytes <= self.max_decoded_mb * 2**20:
            return
        raise AudioDecodeError(
            f"{label}: {detail} = {decoded_bytes / 2**20:.0f} MB of decoded samples, more than the "
            f"{self.max_decoded_mb:g} MB allowed (max_decoded_mb); convert it to mono at 16 kHz first",
            OVER_BUDGET,
        )


def _check_range(data: np.ndarray, label: str) -> None:
    """Refuse samples beyond ``MAX_FLOAT_PEAK`` (only float formats can hold them; integer PCM decodes
    within [-1, 1])."""
    peak = max(float(data.max()), -float(data.min()))  # no |data| copy of a long recording
    if peak <= MAX_FLOAT_PEAK:
        return
    raise AudioDecodeError(
        f"{label}: samples reach {peak:g}, far outside the [-1, 1] of float audio (more than "
        f"{MAX_FLOAT_PEAK:g} is refused); the file likely holds integer-scale values stored as float: "
        "rescale it to [-1, 1] (divide 16-bit values by 32768) or re-export it",
        OUT_OF_RANGE,
    )


def sniff_container(head: bytes) -> str | None:
    """The ffmpeg demuxer (one of ``FFMPEG_DEMUXERS``) for audio whose first bytes are ``head``, or None
    for anything else (a playlist, a list of files, text, an unknown format)."""
    if head[4:8] in (b"ftyp", b"moov", b"mdat", b"free", b"wide"):
        return "mov"  # M4A/MP4
    if head.startswith(b"\x1aE\xdf\xa3"):
        return "matroska"  # WebM/MKV: the EBML header
    if head[:4] in (b"RIFF", b"RF64") and head[8:12] == b"WAVE":
        return "wav"
    if head.startswith(b"fLaC"):
        return "flac"
    if head.startswith(b"OggS"):
        return "ogg"
    if len(head) >= 2 and head[0] == 0xFF and head[1] & 0xF6 == 0xF0:
        return "aac"  # ADTS: 12-bit sync, layer 00
    if head.startswith(b"ID3") or (len(head) >= 2 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0):
        return "mp3"  # an ID3 tag or an MPEG audio frame sync
    return None


def _describe_content(head: bytes) -> str:
    text = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    if text.startswith(b"#EXT"):
        return "an M3U/HLS playlist"
    if text.startswith(b"ffconcat"):
        return "an ffconcat list"
    if text and all(32 <= byte < 127 or byte in b"\t\r\n" for byte in text):
        return "text"
    return "data of an unknown format"


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


def _decode_soundfile(source: str | Path | bytes, label: str, limits: _Limits) -> tuple[np.ndarray, int]:
    handle = io.BytesIO(source) if isinstance(source, bytes) else str(source)
    with soundfile.SoundFile(handle) as sound:
        declared, rate = sound.frames, sound.samplerate
        if _WAV_TRUNCATED.search(sound.extra_info):  # its declared length is not the real one
            raise AudioDecodeError(
                f"{label}: truncated WAV (the header declares more audio than the file holds)",
                "truncated audio",
            )
        # Both before decoding: what the header declares is what reading would allocate, (frames, C) float32.
        _check_duration(declared, rate, limits.max_duration_sec, label, from_header=True)
        limits.check_decoded_bytes(
            4 * declared * sound.channels,
            label,
            f"the header declares {sound.channels} channels x {rate} Hz x {declared / max(rate, 1):.1f} s",
        )
        data = sound.read(dtype="float32", always_2d=False)
    if declared > 0 and len(data) < declared * (1 - TRUNCATION_TOLERANCE):
        raise AudioDecodeError(
            f"{label}: truncated audio (the header declares {declared} frames, only {len(data)} decode)",
            "truncated audio",
        )
    return data, rate


def _decode_ffmpeg_or_raise(
    source: str | Path | bytes, sample_rate: int, label: str, suffix: str, previous: str, limits: _Limits
) -> tuple[np.ndarray, int]:
    try:
        data, rate = _decode_ffmpeg(source, sample_rate, suffix, limits)
    except AudioDecodeError as ff_error:
        if ff_error.reason == NOT_AUDIO:
            # libsndfile's "Format not recognised" (``previous``) adds nothing to what the content is.
            raise AudioDecodeError(f"{label}: cannot decode audio: {ff_error}", NOT_AUDIO) from None
        raise AudioDecodeError(
            f"{label}: cannot decode audio ({previous}{ff_error}). Check that the file is complete and "
            f"in one of {', '.join(AUDIO_EXTENSIONS)}"
        ) from None
    limits.check_decoded_bytes(4 * len(data), label, f"at least {len(data)} mono samples at {rate} Hz")
    return data, rate


def _decode_ffmpeg(
    source: str | Path | bytes, sample_rate: int, suffix: str, limits: _Limits
) -> tuple[np.ndarray, int]:
    if isinstance(source, bytes):
        head = source[:_SNIFF_BYTES]
    else:
        with open(source, "rb") as handle:  # a regular file: load_audio checked it
            head = handle.read(_SNIFF_BYTES)
    demuxer = sniff_container(head)
    if demuxer is None:
        raise AudioDecodeError(
            f"the content is {_describe_content(head)}, not audio in a supported format "
            f"({', '.join(AUDIO_EXTENSIONS)}); playlists and lists of other files are never followed: "
            "give the audio file itself",
            NOT_AUDIO,
        )
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        raise AudioDecodeError("ffmpeg is not installed (run `make setup`)")
    if not isinstance(source, bytes):
        return _run_ffmpeg(ffmpeg, str(source), demuxer, sample_rate, limits)
    # Bytes go through a temporary file, not a pipe: MP4/M4A keeps its index (the moov atom) at the end of
    # the file unless written with +faststart, and ffmpeg cannot seek back in a pipe. Measured here: a 60 s
    # M4A from stdin decodes to 0 samples, from a file to all of them. Writing a few MB to /tmp costs far
    # less than the ffmpeg process start it accompanies.
    with tempfile.NamedTemporaryFile(suffix=suffix or ".audio") as tmp:
        tmp.write(source)
        tmp.flush()
        return _run_ffmpeg(ffmpeg, tmp.name, demuxer, sample_rate, limits)


def _run_ffmpeg(
    ffmpeg: str, input_path: str, demuxer: str, sample_rate: int, limits: _Limits
) -> tuple[np.ndarray, int]:
    # -xerror stops on the first decode error (truncated FLAC/WAV/AAC would otherwise decode partially
    # with exit status 0); at -v error anything on stderr is an error (a truncated WebM only logs one).
    # -f and -protocol_whitelist: ffmpeg neither probes the format nor opens anything but this file.
    command = [ffmpeg, "-nostdin", "-v", "error", "-xerror", "-protocol_whitelist", "file", "-f", demuxer]
    if demuxer == "mov":
        command += ["-enable_drefs", "0"]  # the default, said here: no external data references
    command += ["-i", f"file:{input_path}"]
    # No header length to trust here: decode at most one sample more than the duration limit or the
    # decoded-size budget (mono float32 at sample_rate) allow, so a longer file shows itself without being
    # decoded whole (the duration and budget checks then refuse it).
    limits_sec = [limits.max_duration_sec] if limits.max_duration_sec is not None else []
    if limits.max_decoded_mb is not None:
        limits_sec.append(limits.max_decoded_mb * 2**20 / 4 / sample_rate)
    if limits_sec:
        command += ["-t", f"{min(limits_sec) + 1.0 / sample_rate:.6f}"]
    command += ["-ac", "1", "-ar", str(sample_rate), "-f", "f32le", "pipe:1"]
    result = subprocess.run(command, capture_output=True, check=False)
    # Joined into one line: the message ends up in a one-line error or skip-report entry.
    stderr = " ".join(result.stderr.decode(errors="replace").replace(input_path, "<input>").split())
    if result.returncode != 0 or stderr:
        raise AudioDecodeError(f"ffmpeg: {stderr[-300:] or f'exit status {result.returncode}'}")
    return np.frombuffer(result.stdout, dtype=np.float32).copy(), sample_rate
