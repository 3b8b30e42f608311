"""Speech from text with espeak-ng, and the speaker split that keeps dev/test voices out of train.

espeak-ng is formant synthesis: fast (about 20 ms of CPU for a short sentence) and, for a fixed
command line, byte-for-byte deterministic, which is what lets the demo corpus be a reproducible DVC
output. A "speaker" is a base voice (an English accent: ``en-us``, ``en-gb-scotland``...) combined
with a variant (a voice quality: ``m3``, ``f2``, ``klatt``...), written ``-v en-us+m3``.
"""

from __future__ import annotations

import io
import random
import struct
import subprocess
import wave
from dataclasses import dataclass

SAMPLE_RATE = 22050  # espeak-ng's native rate; resampling is the feature stage's job

# The English base voices shipped with espeak-ng itself (the mbrola ones need extra packages).
BASE_VOICES = (
    "en-us",
    "en-gb",
    "en-gb-scotland",
    "en-gb-x-rp",
    "en-gb-x-gbclan",
    "en-gb-x-gbcwmd",
    "en-029",
    "en-us-nyc",
)
# Variants that stay intelligible; novelty ones (whisper, robosoft, Demonic, fast...) are left out
# because a demo model should learn speech, not effects. Grouped by gender so that each split gets both.
FEMALE_VARIANTS = (*(f"f{i}" for i in range(1, 6)), "linda", "belinda", "steph", "anika")
MALE_VARIANTS = (*(f"m{i}" for i in range(1, 9)), "klatt", "klatt2", "klatt3", "croak", "david", "john")
MALE_VARIANTS += ("rob", "paul", "edward", "max")
HELD_OUT_PER_SPLIT = {"female": 2, "male": 2}  # variants given to dev and to test each
# Speaking rate and pitch are drawn uniformly per utterance so that a model meets slow and fast,
# low and high speakers. espeak-ng accepts -s 80..450 wpm (default 175) and -p 0..99 (default 50).
# Beyond ~260 wpm phonemes get clipped into a blur, below ~110 words stretch into drawls; inside
# 110..260 a 39-word sentence lasts 16.0 s to 6.8 s (en-us+m3), a 2.34x ratio against the nominal
# 2.36x, and the pitch extremes 5 and 95 stay recognisable voices. Measured on 3000 corpus-like first
# draws, the share falling outside the corpus's 1-12 s window went from 2.5% (130..200 wpm) to 6.4%
# (4.5% too short: two-word replies at fast rates; 1.9% too long) -- cheap redraws.
RATE_WPM_RANGE = (110, 260)
PITCH_RANGE = (5, 95)

# (base voice, variant); variant None is the base voice's own default speaker.
VoicePair = tuple[str, str | None]


@dataclass(frozen=True)
class Voice:
    name: str  # espeak-ng base voice, e.g. "en-us"
    variant: str | None  # e.g. "m3"; None keeps the base voice's default
    rate_wpm: int
    pitch: int  # espeak-ng pitch adjustment, 0..99 (50 is the voice's normal pitch)

    @property
    def espeak_name(self) -> str:
        return self.name if self.variant is None else f"{self.name}+{self.variant}"


def split_voices(seed: int) -> dict[str, list[VoicePair]]:
    """Speakers per split, with every variant used by exactly one split.

    dev and test each get their own held-out variants (two female, two male, drawn with ``seed``),
    crossed with every base voice; train gets all other variants plus the default speakers. So no
    (voice, variant) pair and no variant heard in dev or test is ever heard in training, the way
    speaker-disjoint splits work for real corpora. Accents are shared: espeak-ng's accents differ in
    pronunciation rules, and a held-out accent would measure pronunciation-lexicon mismatch rather
    than generalization to a new voice.
    """
    rng = random.Random(f"split_voices/{seed}")
    variants: dict[str, list[str | None]] = {"train": [None], "dev": [], "test": []}
    for group, pool in (("female", FEMALE_VARIANTS), ("male", MALE_VARIANTS)):
        shuffled = list(pool)
        rng.shuffle(shuffled)
        held = HELD_OUT_PER_SPLIT[group]
        variants["dev"] += shuffled[:held]
        variants["test"] += shuffled[held : 2 * held]
        variants["train"] += shuffled[2 * held :]
    return {
        split: [(name, variant) for name in BASE_VOICES for variant in split_variants]
        for split, split_variants in variants.items()
    }


def draw_voice(
    pairs: list[VoicePair],
    rng: random.Random,
    rate_wpm: tuple[int, int] = RATE_WPM_RANGE,
    pitch: tuple[int, int] = PITCH_RANGE,
) -> Voice:
    """A speaker from ``pairs`` with a per-utterance speaking rate and pitch, each uniform in its range."""
    name, variant = rng.choice(pairs)
    return Voice(name, variant, rng.randint(*rate_wpm), rng.randint(*pitch))


def synthesize(text: str, voice: Voice, espeak_binary: str = "espeak-ng") -> bytes:
    """WAV bytes (22.05 kHz, 16-bit mono PCM) of ``voice`` speaking ``text``."""
    command = [espeak_binary, "-v", voice.espeak_name, "-s", str(voice.rate_wpm), "-p", str(voice.pitch)]
    command.append("--stdout")
    shown = " ".join(command)
    try:
        # Text goes through stdin so that it can never be read as a command-line flag.
        result = subprocess.run(command, input=text.encode("utf-8"), capture_output=True, check=False)
    except FileNotFoundError as error:
        raise RuntimeError(
            f"cannot run `{shown}`: {espeak_binary!r} was not found. Install espeak-ng "
            f"(Debian/Ubuntu: apt-get install espeak-ng) or pass the binary's path."
        ) from error
    if result.returncode != 0:
        stderr = result.stderr.decode("utf-8", "replace").strip()
        raise RuntimeError(f"`{shown}` failed with exit status {result.returncode}: {stderr}")
    return _with_exact_sizes(result.stdout, shown)


def _with_exact_sizes(stream: bytes, shown: str) -> bytes:
    """Rewrite a streamed WAV so its RIFF and data sizes are the real ones.

    With ``--stdout`` espeak-ng cannot seek back, so it writes 0x7ffff000-ish placeholder sizes;
    readers that trust the header would then see a two-billion-frame file.
    """
    if stream[:4] != b"RIFF" or stream[8:12] != b"WAVE":
        raise RuntimeError(f"`{shown}` did not produce a WAV stream (got {len(stream)} bytes)")
    channels = sample_rate = sample_width = None
    position = 12
    while position + 8 <= len(stream):
        chunk_id, size = struct.unpack("<4sI", stream[position : position + 8])
        body_start = position + 8
        if chunk_id == b"fmt ":
            _, channels, sample_rate, _, _, bits = struct.unpack(
                "<HHIIHH", stream[body_start : body_start + 16]
            )
            sample_width = bits // 8
        elif chunk_id == b"data":
            if channels is None:
                break
            pcm = stream[body_start:]
            pcm = pcm[: len(pcm) - len(pcm) % (channels * sample_width)]
            buffer = io.BytesIO()
            with wave.open(buffer, "wb") as out:
                out.setnchannels(channels)
                out.setsampwidth(sample_width)
                out.setframerate(sample_rate)
                out.writeframes(pcm)
            return buffer.getvalue()
        position = body_start + size + size % 2
    raise RuntimeError(f"`{shown}` produced a WAV stream without fmt and data chunks")


def wav_duration_seconds(wav: bytes) -> float:
    """Duration of a PCM WAV held in memory, from its header."""
    with wave.open(io.BytesIO(wav), "rb") as reader:
        return reader.getnframes() / reader.getframerate()
