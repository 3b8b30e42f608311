"""Lossy codec round trip: encode with ffmpeg (MP3 via LAME, Opus via libopus), decode, realign.

Compressed audio is what much real test data went through (voice messages, podcasts, VoIP); coding the
training or test audio to simulate it follows e.g. Ferras et al., 2016, "A large-scale open-source
acoustic simulator for speaker recognition" (codecs among its degradations) and the codec augmentation
of torchaudio's data augmentation tutorial and audiomentations' ``Mp3Compression``.

ffmpeg runs twice per call (encode, then decode), through pipes: no temporary files. Each run starts a
process (~75 ms of CPU here), which dominates the cost of a short utterance.

An MP3 encoder delays its output (LAME: 576 + 529 = 1105 samples at the encoding rate) and ffmpeg's MP3
decoder trims it only when the stream's LAME tag records it, which ffmpeg's MP3 muxer writes to seekable
output only, not to a pipe (measured: 1105 samples of lag at 16 kHz). Opus in Ogg records its pre-skip up
front, so it decodes aligned. Rather than trust constants per codec, rate and version, the lag is measured
once per (codec, rate, bitrate) by coding a band-limited noise probe and cross-correlating, and cached.
LAME, as ffmpeg drives it, also lowers the level by 0.45 dB (gain 0.95 at every bitrate, measured with
libsndfile's decoder too); that is left in, as part of what such an MP3 is.
"""

from __future__ import annotations

import functools
import math
import shutil
import subprocess

import numpy as np

# codec -> (ffmpeg encoder, container, the sample rates the encoder accepts)
_CODECS = {
    "mp3": ("libmp3lame", "mp3", (8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000)),
    "opus": ("libopus", "ogg", (8000, 12000, 16000, 24000, 48000)),
}
CODECS = tuple(_CODECS)
# The delay search window, either way: LAME's 1105 samples are 0.07 s at 16 kHz but 0.14 s at 8 kHz.
MAX_DELAY_SEC = 0.3
PROBE_SEC = 1.0


class CodecError(RuntimeError):
    """ffmpeg is missing or failed; the message says which and what to do."""


def codec_round_trip(waveform: np.ndarray, sample_rate: int, codec: str, bitrate_kbps: float) -> np.ndarray:
    """``waveform`` (N,) encoded as ``codec`` at ``bitrate_kbps``, decoded: (N,) float32 at ``sample_rate``.

    Encodes at ``sample_rate`` when the encoder accepts it, otherwise at the next rate up it accepts
    (Opus: 8, 12, 16, 24 or 48 kHz), and decodes back to ``sample_rate``. The codec's delay is removed
    and the length kept (module docstring). Raises CodecError when ffmpeg is missing or fails.
    """
    if codec not in _CODECS:
        raise ValueError(f"codec must be one of {list(CODECS)}, got {codec!r}")
    if not (math.isfinite(bitrate_kbps) and bitrate_kbps > 0):
        raise ValueError(f"bitrate_kbps must be a positive number, got {bitrate_kbps!r}")
    if waveform.size == 0:
        return waveform
    decoded = _encode_decode(waveform, sample_rate, codec, bitrate_kbps)
    delay = _codec_delay(codec, sample_rate, bitrate_kbps)
    aligned = decoded[delay:] if delay >= 0 else np.concatenate([np.zeros(-delay, np.float32), decoded])
    # Codecs pad to whole frames (LAME: 1152 samples) and resampling can shift a sample: fit to N.
    aligned = aligned[: len(waveform)]
    return np.pad(aligned, (0, len(waveform) - len(aligned))).astype(np.float32)


def encoder_rate(codec: str, sample_rate: int) -> int:
    """The rate ``codec`` is encoded at for input at ``sample_rate`` (``codec_round_trip``)."""
    accepted = _CODECS[codec][2]
    return next((rate for rate in accepted if rate >= sample_rate), accepted[-1])


def _encode_decode(waveform: np.ndarray, sample_rate: int, codec: str, bitrate_kbps: float) -> np.ndarray:
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        raise CodecError(
            "codec augmentation needs the ffmpeg command-line tool, which is not on PATH; install it "
            "(apt-get install ffmpeg) and check that `ffmpeg -encoders` lists libmp3lame and libopus"
        )
    encoder, container, _ = _CODECS[codec]
    raw = ["-f", "f32le", "-ac", "1", "-ar", str(sample_rate)]  # mono float32 PCM on the pipe
    bits = str(round(bitrate_kbps * 1000))
    coded = ["-c:a", encoder, "-b:a", bits, "-ar", str(encoder_rate(codec, sample_rate)), "-f", container]
    encoded = _run(
        [ffmpeg, *raw, "-i", "pipe:0", *coded, "pipe:1"],
        np.ascontiguousarray(waveform, dtype=np.float32).tobytes(),
        f"encoding {codec} at {bitrate_kbps:g} kbps from {sample_rate} Hz",
    )
    decoded = _run([ffmpeg, "-f", container, "-i", "pipe:0", *raw, "pipe:1"], encoded, f"decoding {codec}")
    return np.frombuffer(decoded, dtype=np.float32)


def _run(command: list[str], data: bytes, what: str) -> bytes:
    command = [command[0], "-hide_banner", "-loglevel", "error", *command[1:]]
    result = subprocess.run(command, input=data, capture_output=True, check=False)
    if result.returncode != 0 or not result.stdout:
        stderr = " ".join(result.stderr.decode(errors="replace").split())[-500:]
        raise CodecError(
            f"ffmpeg failed {what} (exit status {result.returncode}): {stderr or 'no output'}. "
            f"Command: {' '.join(command)}"
        )
    return result.stdout


@functools.lru_cache(maxsize=64)
def _codec_delay(codec: str, sample_rate: int, bitrate_kbps: float) -> int:
    """Samples (at ``sample_rate``) by which the decoded audio lags its input, measured on a probe."""
    # White noise band-limited to 200–3000 Hz: inside every codec's passband even at low bitrates, and
    # with a sharp autocorrelation peak. (Pink noise, mostly below 50 Hz, peaked so broadly that the
    # 8 kHz MP3 delay came out 372 samples instead of 1105.)
    white = np.random.default_rng(0).standard_normal(round(PROBE_SEC * sample_rate))
    spectrum = np.fft.rfft(white)
    frequencies = np.fft.rfftfreq(len(white), 1.0 / sample_rate)
    spectrum[(frequencies < 200.0) | (frequencies > min(3000.0, 0.4 * sample_rate))] = 0.0
    probe = np.fft.irfft(spectrum, len(white))
    probe = (0.1 * probe / np.sqrt(np.mean(probe**2))).astype(np.float32)
    decoded = _encode_decode(probe, sample_rate, codec, bitrate_kbps).astype(np.float64)
    size = 1 << (len(probe) + len(decoded)).bit_length()
    correlation = np.fft.irfft(np.fft.rfft(decoded, size) * np.conj(np.fft.rfft(probe, size)), size)
    max_lag = round(MAX_DELAY_SEC * sample_rate)
    lags = np.concatenate([np.arange(0, max_lag + 1), np.arange(-max_lag, 0)])  # circular lag order
    scores = np.abs(np.concatenate([correlation[: max_lag + 1], correlation[-max_lag:]]))
    return int(lags[np.argmax(scores)])
