"""Additive noise: coloured noise, babble from other utterances, a folder of recorded noise, mixed at an SNR.

Noise at a random SNR is the oldest robustness augmentation; the recorded-noise variant follows Snyder et
al., 2015, "MUSAN: A Music, Speech, and Noise Corpus" (arXiv:1510.08484), whose "noise" and "speech"
parts Kaldi mixes in for its noise and babble conditions. Coloured noise is white Gaussian noise shaped
in the frequency domain: amplitude × f^(-1/2) gives pink (1/f power, -10 dB per decade), × f^(-1)
brown (1/f², -20 dB per decade).

SNR is power over the whole utterance (silences included, as Kaldi's and lhotse's mixers do), so the
same ``snr_db`` is harder on an utterance with long pauses; it is exact, not drawn around. Nothing is
clipped: the mix may exceed [-1, 1] at low SNR, and clipping would both distort and move the SNR.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from asr_pipeline.io.audio import AUDIO_EXTENSIONS, AudioDecodeError, load_audio
from asr_pipeline.io.folders import walk_files
from asr_pipeline.io.report import SkipReport

NOISE_COLOURS = ("white", "pink", "brown")
# Power-spectrum exponent of each colour: power ∝ f^-exponent.
_COLOUR_EXPONENT = {"white": 0.0, "pink": 1.0, "brown": 2.0}
# Decoded noise a NoiseFolder keeps per process: 1 h is 230 MB of float32 at 16 kHz (NoiseFolder).
DEFAULT_MAX_CACHED_SEC = 3600.0


def coloured_noise(num_samples: int, colour: str, rng: np.random.Generator) -> np.ndarray:
    """(num_samples,) float32 Gaussian noise of ``colour`` (white, pink or brown) at unit RMS."""
    if colour not in _COLOUR_EXPONENT:
        raise ValueError(f"noise colour must be one of {list(NOISE_COLOURS)}, got {colour!r}")
    white = rng.standard_normal(num_samples)
    if num_samples == 0:
        return white.astype(np.float32)
    exponent = _COLOUR_EXPONENT[colour]
    if exponent:
        frequencies = np.fft.rfftfreq(num_samples)  # (N // 2 + 1,) in cycles per sample
        # DC gets the lowest frequency's gain instead of an infinite one (which would also make brown
        # noise a drifting offset).
        frequencies[0] = frequencies[1] if len(frequencies) > 1 else 1.0
        spectrum = np.fft.rfft(white) * frequencies ** (-exponent / 2)
        white = np.fft.irfft(spectrum, n=num_samples)
    return (white / _rms(white)).astype(np.float32)


def babble(waveforms: Sequence[np.ndarray], num_samples: int, rng: np.random.Generator) -> np.ndarray:
    """(num_samples,) float32 babble at unit RMS: the sum of ``waveforms`` (other speakers' utterances).

    Each waveform starts at a random offset and loops to length, and is brought to unit RMS (over the
    whole utterance) before the sum so that no one loud speaker stands out: babble is useful as noise
    because no single voice can be followed. Silent waveforms are left out; all of them silent is an
    error.
    """
    voices = [np.asarray(waveform, dtype=np.float64) for waveform in waveforms]
    voices = [voice for voice in voices if voice.size and np.any(voice)]
    if not voices:
        raise ValueError(
            f"babble needs at least one non-silent waveform, got {len(waveforms)} waveform(s), all empty or "
            "silent; give the babble pool real utterances"
        )
    mixture = np.zeros(num_samples)
    for voice in voices:
        start = int(rng.integers(len(voice)))
        mixture += np.take(voice, np.arange(start, start + num_samples), mode="wrap") / _rms(voice)
    if num_samples and not np.any(mixture):
        raise ValueError("babble came out silent: the chosen segments of every voice are silent")
    return (mixture / _rms(mixture) if num_samples else mixture).astype(np.float32)


def add_noise(speech: np.ndarray, noise: np.ndarray, snr_db: float) -> np.ndarray:
    """``speech + g * noise`` (float32, (N,)) with ``g`` such that 10·log10(P_speech / P_noise) = ``snr_db``.

    Powers are means over the whole utterance. Silent speech is returned unchanged (no SNR exists for
    it); silent noise next to non-silent speech is an error, as no gain reaches a finite SNR.
    """
    if not np.isfinite(snr_db):
        raise ValueError(f"snr_db must be a finite number of dB, got {snr_db!r}")
    if speech.shape != noise.shape:
        raise ValueError(f"speech and noise must have the same shape, got {speech.shape} and {noise.shape}")
    speech_power = _power(speech)
    if speech_power == 0.0:
        return speech
    noise_power = _power(noise)
    if noise_power == 0.0:
        raise ValueError("noise is silent: no gain can mix it at a finite SNR")
    gain = np.sqrt(speech_power / (noise_power * 10.0 ** (snr_db / 10.0)))
    return (speech.astype(np.float64) + gain * noise).astype(np.float32)


class NoiseFolder:
    """The audio files below ``path`` (recursively, any of ``AUDIO_EXTENSIONS``), drawn from as noise.

    Files are listed once, sorted, so a draw depends only on the folder's content and the ``rng``. They
    are decoded lazily, on their first draw, and kept in memory up to ``max_cached_sec`` of audio (least
    recently drawn dropped first): noise folders are small next to a corpus (MUSAN's noise part is 6 h,
    1.4 GB at 16 kHz), and a worker drawing noise for every few utterances should not decode and resample
    the same file each time. Lower ``max_cached_sec`` when many
    workers each hold a cache.
    """

    def __init__(self, path: str | Path, max_cached_sec: float = DEFAULT_MAX_CACHED_SEC) -> None:
        self.path = Path(path)
        if not self.path.is_dir():
            raise ValueError(f"noise folder {self.path} does not exist or is not a folder")
        listed = walk_files(self.path, SkipReport())
        self.files = tuple(file for file in listed if file.suffix.lower() in AUDIO_EXTENSIONS)
        if not self.files:
            raise ValueError(
                f"noise folder {self.path} holds no audio files (looked for {', '.join(AUDIO_EXTENSIONS)} "
                "in it and its subfolders); point noise_dir at a folder of noise recordings"
            )
        self.max_cached_sec = max_cached_sec
        self._cache: OrderedDict[tuple[Path, int], np.ndarray] = OrderedDict()

    def draw(self, num_samples: int, sample_rate: int, rng: np.random.Generator) -> np.ndarray:
        """(num_samples,) float32 from a random file at a random offset, looped when the file is short."""
        noise = self._decoded(self.files[int(rng.integers(len(self.files)))], sample_rate)
        # A long file: any start that fits; a short one: any start, looping around its end.
        starts = len(noise) - num_samples + 1 if len(noise) >= num_samples else len(noise)
        start = int(rng.integers(starts))
        return np.take(noise, np.arange(start, start + num_samples), mode="wrap")

    def _decoded(self, file: Path, sample_rate: int) -> np.ndarray:
        key = (file, sample_rate)
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        try:
            noise = load_audio(file, sample_rate)
        except AudioDecodeError as error:
            raise AudioDecodeError(
                f"noise folder {self.path}: cannot use {file}: {error}. Remove or convert the file",
                error.reason,
            ) from None
        if not np.any(noise):
            raise ValueError(
                f"noise folder {self.path}: {file} is silent, so it cannot be mixed at an SNR; remove it"
            )
        self._cache[key] = noise
        while sum(len(cached) for cached in self._cache.values()) > self.max_cached_sec * sample_rate:
            if len(self._cache) == 1:
                break  # the file just decoded is needed now, however long
            self._cache.popitem(last=False)
        return noise


def _power(waveform: np.ndarray) -> float:
    return float(np.mean(np.square(waveform, dtype=np.float64))) if waveform.size else 0.0


def _rms(waveform: np.ndarray) -> float:
    return float(np.sqrt(_power(waveform)))
