"""The built-in demo corpus: generated sentences spoken by espeak-ng, laid out like real data.

Layout (paths relative to the corpus root; one form of each input the pipeline accepts):

    train/<id>.wav, train/<id>.txt     an audio folder with transcript sidecars
    dev.jsonl, dev/<id>.wav            JSONL manifests {"id", "audio_path", "text", "speaker", "rate_wpm",
    test.jsonl, test/<id>.wav          "pitch"}, audio_path relative to the manifest's folder; speaker is the
    test_open.jsonl, test_open/        espeak-ng voice (``en-us+m3``): with rate and pitch it replays the
                                       synthesis (demo.phones: phone alignments, HuBERT's ABX items)

``test_open`` is the open test set: everyday sentences written by hand (``demo/data/open_sentences.txt``),
independently of the generator's templates and words, some of them in no training transcript, spoken by test's
held-out voices. Test measures the generator's language with new sentences; test_open measures whether the model
learned speech or only the generator's shapes.

Reproducibility: every utterance draws its sentence, speaker, rate and pitch from an RNG seeded by
(seed, split, index, attempt), and espeak-ng is deterministic, so the files are byte-identical for
the same params however many threads synthesize them. Transcripts are unique across the whole corpus
so that no dev or test sentence is also a training sentence.
"""

from __future__ import annotations

import json
import logging
import random
from collections import Counter
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asr_pipeline.demo.sentences import generate_sentences
from asr_pipeline.demo.synthesis import (
    PITCH_RANGE,
    RATE_WPM_RANGE,
    Voice,
    VoicePair,
    draw_voice,
    split_voices,
    synthesize,
    wav_duration_seconds,
)
from asr_pipeline.options import options_from_dict

logger = logging.getLogger(__name__)

SPLITS = ("train", "dev", "test", "test_open")
OPEN_SENTENCES_FILE = Path(__file__).with_name("data") / "open_sentences.txt"


def open_sentences() -> list[str]:
    """The open test set's sentences, in file order (comments and blank lines left out)."""
    lines = OPEN_SENTENCES_FILE.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


# A sentence that misses the duration window is redrawn; at the defaults 23 of 1800 are (1.3%, plus
# 37 redraws for duplicate texts), so 50 draws failing in a row means the window cannot be met.
MAX_DRAWS_PER_UTTERANCE = 50


@dataclass(frozen=True)
class DemoCorpusParams:
    train_size: int = 1500
    dev_size: int = 150
    test_size: int = 150
    test_open_size: int | None = None  # the open test set: its first N sentences; None: every one
    seed: int = 1234
    min_duration_sec: float = 1.0
    max_duration_sec: float = 12.0
    max_words: int = 30
    # Speaking rate (espeak-ng words per minute) and pitch (0..99), drawn uniformly per utterance in every split.
    rate_wpm: tuple[int, int] = RATE_WPM_RANGE
    pitch: tuple[int, int] = PITCH_RANGE
    jobs: int = 2  # espeak-ng subprocesses running at once

    def __post_init__(self) -> None:
        available = len(open_sentences())
        if self.test_open_size is not None and not 0 <= self.test_open_size <= available:
            raise ValueError(
                f"demo_corpus: test_open_size must be in [0, {available}] (the open sentences written), got "
                f"{self.test_open_size}"
            )
        for name in ("train_size", "dev_size", "test_size"):
            if getattr(self, name) < 0:
                raise ValueError(f"demo_corpus: {name} must be >= 0, got {getattr(self, name)}")
        if not 0 <= self.min_duration_sec < self.max_duration_sec:
            raise ValueError(
                f"demo_corpus: need 0 <= min_duration_sec < max_duration_sec, got "
                f"{self.min_duration_sec} and {self.max_duration_sec}"
            )
        if self.max_words < 2:
            raise ValueError(f"demo_corpus: max_words must be >= 2, got {self.max_words}")
        if self.jobs < 1:
            raise ValueError(f"demo_corpus: jobs must be >= 1, got {self.jobs}")
        # espeak-ng's own limits: -s 80..450 words per minute, -p 0..99
        for name, (lowest, highest) in (("rate_wpm", (80, 450)), ("pitch", (0, 99))):
            low, high = getattr(self, name)
            if not lowest <= low <= high <= highest:
                raise ValueError(
                    f"demo_corpus: {name} must be [low, high] with {lowest} <= low <= high <= {highest}, "
                    f"got {[low, high]}"
                )

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> DemoCorpusParams:
        return options_from_dict(cls, raw, "params.yaml demo_corpus")

    def size(self, split: str) -> int:
        if split == "test_open":
            return len(open_sentences()) if self.test_open_size is None else self.test_open_size
        return {"train": self.train_size, "dev": self.dev_size, "test": self.test_size}[split]


@dataclass(frozen=True)
class Utterance:
    id: str
    text: str
    voice: Voice
    wav: bytes
    duration_sec: float


@dataclass(frozen=True)
class DemoCorpus:
    utterances: dict[str, list[Utterance]]  # split -> utterances in id order
    redraws: dict[str, int]  # reason ("too_short", "too_long", "duplicate_text") -> count

    def report(self) -> dict[str, Any]:
        """Small JSON-able summary: counts, hours and redraws per split, variants heard."""
        splits = {
            split: {
                "utterances": len(utts),
                "hours": round(sum(u.duration_sec for u in utts) / 3600, 4),
                "variants": sorted({u.voice.variant or "default" for u in utts}),
            }
            for split, utts in self.utterances.items()
        }
        return {"splits": splits, "redraws": dict(sorted(self.redraws.items()))}


def _plan(
    params: DemoCorpusParams, split: str, index: int, attempt: int, pairs: list[VoicePair]
) -> tuple[str, Voice]:
    """The (text, voice) of one draw; depends on nothing but its coordinates. An open test sentence is fixed:
    a redraw changes only its voice."""
    rng = random.Random(f"demo_corpus/{params.seed}/{split}/{index}/{attempt}")
    if split == "test_open":
        return open_sentences()[index], draw_voice(pairs, rng, params.rate_wpm, params.pitch)
    text = generate_sentences(1, seed=rng.getrandbits(64), max_words=params.max_words)[0]
    return text, draw_voice(pairs, rng, params.rate_wpm, params.pitch)


def synthesize_corpus(params: DemoCorpusParams, espeak_binary: str = "espeak-ng") -> DemoCorpus:
    """Synthesize every utterance, redrawing those outside the duration window, in rounds.

    Planning (which may redraw for a duplicate text) runs sequentially in slot order and only the
    espeak-ng calls run in threads, so the outcome never depends on thread timing.
    """
    pairs = split_voices(params.seed)
    pairs["test_open"] = pairs["test"]  # the held-out test voices
    # The open sentences are planned first, so a generated sentence equal to one is the one redrawn.
    order = ("test_open", *(split for split in SPLITS if split != "test_open"))
    slots = [(split, index) for split in order for index in range(params.size(split))]
    attempts = [0] * len(slots)
    plans: dict[int, tuple[str, Voice]] = {}
    done: dict[int, Utterance] = {}
    texts_in_use: set[str] = set()
    redraws: Counter[str] = Counter()

    def redraw(slot: int, reason: str, detail: str) -> None:
        redraws[reason] += 1
        attempts[slot] += 1
        if attempts[slot] >= MAX_DRAWS_PER_UTTERANCE:
            split, index = slots[slot]
            raise RuntimeError(
                f"demo_corpus: no usable draw for {_utterance_id(split, index)} in "
                f"{MAX_DRAWS_PER_UTTERANCE} draws (last: {detail}); it must be a new sentence lasting "
                f"[{params.min_duration_sec}, {params.max_duration_sec}] s. Widen the duration window "
                f"or change max_words."
            )

    pending = list(range(len(slots)))
    with ThreadPoolExecutor(max_workers=params.jobs) as pool:
        while pending:
            for slot in pending:
                split, index = slots[slot]
                text, voice = _plan(params, split, index, attempts[slot], pairs[split])
                while text in texts_in_use:
                    redraw(slot, "duplicate_text", f"{text!r} already used")
                    text, voice = _plan(params, split, index, attempts[slot], pairs[split])
                texts_in_use.add(text)
                plans[slot] = (text, voice)
            wavs = pool.map(lambda slot: synthesize(*plans[slot], espeak_binary), pending)
            retry = []
            for slot, wav in zip(pending, wavs, strict=True):
                text, voice = plans[slot]
                duration = wav_duration_seconds(wav)
                if params.min_duration_sec <= duration <= params.max_duration_sec:
                    done[slot] = Utterance(_utterance_id(*slots[slot]), text, voice, wav, duration)
                    continue
                texts_in_use.discard(text)
                reason = "too_short" if duration < params.min_duration_sec else "too_long"
                words = len(text.split())
                redraw(slot, reason, f"{duration:.2f} s for {words} words at {voice.rate_wpm} wpm")
                retry.append(slot)
            pending = retry

    utterances: dict[str, list[Utterance]] = {split: [] for split in SPLITS}
    for slot, (split, _) in enumerate(slots):
        utterances[split].append(done[slot])
    return DemoCorpus(utterances, dict(redraws))


def _utterance_id(split: str, index: int) -> str:
    return f"{split}-{index + 1:06d}"


def layout_files(corpus: DemoCorpus) -> dict[str, bytes]:
    """Relative path -> file bytes, in the layout described in the module docstring."""
    files: dict[str, bytes] = {}
    for utt in corpus.utterances["train"]:
        files[f"train/{utt.id}.wav"] = utt.wav
        files[f"train/{utt.id}.txt"] = (utt.text + "\n").encode("utf-8")
    for split in ("dev", "test", "test_open"):
        utts = corpus.utterances[split]
        rows = [
            {"id": u.id, "audio_path": f"{split}/{u.id}.wav", "text": u.text, "speaker": u.voice.espeak_name,
             "rate_wpm": u.voice.rate_wpm, "pitch": u.voice.pitch}
            for u in utts
        ]  # fmt: skip
        files[f"{split}.jsonl"] = "".join(json.dumps(row) + "\n" for row in rows).encode("utf-8")
        for utt in utts:
            files[f"{split}/{utt.id}.wav"] = utt.wav
    return files


def build_demo_corpus(params: DemoCorpusParams, espeak_binary: str = "espeak-ng") -> dict[str, bytes]:
    """The demo corpus as relative path -> bytes; logs a summary including redraw counts."""
    corpus = synthesize_corpus(params, espeak_binary)
    logger.info("demo corpus: %s", json.dumps(corpus.report()))
    return layout_files(corpus)
