"""The SpeechOcean762 layout: human pronunciation scores per utterance, word and phone.

    <root>/train/, <root>/test/       Kaldi data dirs: wav.scp, text, utt2spk (io.kaldi reads wav.scp/text)
    <root>/resource/scores.json       {utt id: {"text", "accuracy", "completeness", "fluency", "prosodic",
                                       "total", "words": [{"text", "accuracy", "stress", "total", "phones",
                                       "phones-accuracy", "mispronunciations"}, ...]}, ...}
    <root>/WAVE/SPEAKERxxxx/*.WAV     the audio; wav.scp names it relative to <root> (the recipe runs there),
                                       so a path that does not exist under the data dir is looked up under <root>

Scores: utterance accuracy, fluency, prosody and total 0-10, completeness 0-10 (a fraction x 10 in the
release); word accuracy, stress and total 0-10; phone accuracy 0-2 (0 wrong or missing, 1 accented, 2 right).
Phones lose their stress (``text.phones``). Skipped and counted, named by file and line or ``scores.json:<id>``:
an utterance without scores, scores whose words do not match the transcript's, a word whose phones and phone
scores differ in number, a phone that is not ARPABET.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asr_pipeline.io.kaldi import iter_kaldi_data_dir, read_table
from asr_pipeline.io.report import SkipReport
from asr_pipeline.text.phones import strip_stress

SCORES_FILE = Path("resource") / "scores.json"
UTTERANCE_ASPECTS = ("accuracy", "completeness", "fluency", "prosodic", "total")


@dataclass(frozen=True)
class WordScore:
    text: str
    accuracy: float
    stress: float
    total: float
    phones: tuple[str, ...]  # stress-free ARPABET
    phone_accuracy: tuple[float, ...]  # 0-2, one per phone
    mispronunciations: tuple[dict, ...] = ()  # as released: {"canonical-phone", "index", "pronounced-phone"}


@dataclass(frozen=True)
class ScoredUtterance:
    id: str
    location: str
    audio_path: str
    text: str
    speaker: str | None
    scores: dict[str, float]  # UTTERANCE_ASPECTS
    words: tuple[WordScore, ...] = field(default_factory=tuple)


def iter_speechocean(root: str | Path, split: str, report: SkipReport) -> Iterator[ScoredUtterance]:
    """The scored utterances of ``root/split`` in ``text`` order (module docstring); bad ones go to
    ``report`` (a strict report raises, naming them)."""
    root = Path(root)
    scores_path = root / SCORES_FILE
    if not scores_path.is_file():
        raise FileNotFoundError(f"{scores_path} does not exist: not a SpeechOcean762 folder ({root})")
    all_scores: dict[str, Any] = json.loads(scores_path.read_text(encoding="utf-8"))
    speakers = {}
    if (root / split / "utt2spk").is_file():
        speakers = {utt: line.value for utt, line in read_table(root / split / "utt2spk", report).items()}
    for record in iter_kaldi_data_dir(root / split, report):  # counts each text line as seen
        where = f"{scores_path}:{record.id}"
        entry = all_scores.get(record.id)
        if entry is None:
            report.skip("no scores", record.location, f"{record.id} is not in {scores_path}")
            continue
        try:
            words = tuple(_word(word) for word in entry["words"])
        except (KeyError, TypeError, ValueError) as error:
            report.skip("malformed scores", where, str(error))
            continue
        transcript = record.text.split()
        if [w.text.lower() for w in words] != [t.lower() for t in transcript]:
            report.skip(
                "scores name other words", where, f"{[w.text for w in words]} vs the text {transcript}"
            )
            continue
        report.kept += 1
        yield ScoredUtterance(
            id=record.id,
            location=record.location,
            audio_path=_audio_path(Path(record.audio_path), root, split),
            text=record.text,
            speaker=speakers.get(record.id),
            scores={aspect: float(entry[aspect]) for aspect in UTTERANCE_ASPECTS if aspect in entry},
            words=words,
        )


def _word(word: dict) -> WordScore:
    phones = tuple(strip_stress(phone) for phone in word["phones"])
    accuracy = tuple(float(value) for value in word["phones-accuracy"])
    if len(phones) != len(accuracy):
        raise ValueError(
            f"word {word.get('text')!r} has {len(phones)} phones but {len(accuracy)} phone scores"
        )
    return WordScore(
        text=word["text"],
        accuracy=float(word["accuracy"]),
        stress=float(word["stress"]),
        total=float(word["total"]),
        phones=phones,
        phone_accuracy=accuracy,
        mispronunciations=tuple(word.get("mispronunciations") or ()),
    )


def _audio_path(path: Path, root: Path, split: str) -> str:
    """wav.scp's path as io.kaldi resolved it (under the data dir), else the same under the corpus root."""
    if path.exists():
        return str(path)
    try:
        return str(root / path.relative_to(root / split))
    except ValueError:  # an absolute path elsewhere: as it is (decoding will name it if it is missing)
        return str(path)


__all__ = ["SCORES_FILE", "UTTERANCE_ASPECTS", "ScoredUtterance", "WordScore", "iter_speechocean"]
