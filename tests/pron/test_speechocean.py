"""pron.speechocean reads a tiny SpeechOcean762-shaped folder: scores per utterance, word and phone (stress
removed), audio found under the corpus root as the release names it, and each kind of bad row skipped and
counted with its file and id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asr_pipeline.io.report import InputError, SkipReport
from asr_pipeline.pron.speechocean import iter_speechocean
from tests.conftest import make_wav


def word(text: str, phones: list[str], accuracy: list[float], total: float = 10) -> dict:
    return {"text": text, "accuracy": total, "stress": 10, "total": total, "phones": phones,
            "phones-accuracy": accuracy, "mispronunciations": []}  # fmt: skip


def utterance(text: str, *words: dict) -> dict:
    return {"text": text, "accuracy": 8, "completeness": 10.0, "fluency": 9, "prosodic": 9, "total": 8,
            "words": list(words)}  # fmt: skip


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    ids = ["000010011", "000010012", "000010013", "000010014", "000010015"]
    for utt in ids:
        (tmp_path / "WAVE" / "SPEAKER0001").mkdir(parents=True, exist_ok=True)
        (tmp_path / "WAVE" / "SPEAKER0001" / f"{utt}.WAV").write_bytes(
            make_wav(seconds=0.5, sample_rate=16000)
        )
    train = tmp_path / "train"
    train.mkdir()
    (train / "wav.scp").write_text("".join(f"{u} WAVE/SPEAKER0001/{u}.WAV\n" for u in ids))
    texts = ["WE CALL IT BEAR", "WE CALL", "IT BEAR", "BEAR", "WE"]
    (train / "text").write_text("".join(f"{u} {t}\n" for u, t in zip(ids, texts, strict=True)))
    (train / "utt2spk").write_text("".join(f"{u} 0001\n" for u in ids))
    we, call = word("WE", ["W", "IY0"], [2.0, 2.0]), word("CALL", ["K", "AO0", "L"], [2.0, 1.0, 0.0], total=6)
    it, bear = word("IT", ["IH0", "T"], [2.0, 2.0]), word("BEAR", ["B", "EH0", "R"], [2.0, 2.0, 2.0])
    scores = {
        ids[0]: utterance(texts[0], we, call, it, bear),
        ids[1]: utterance(texts[1], we),  # a word short of its text
        ids[2]: utterance(texts[2], it, {**bear, "phones-accuracy": [2.0]}),  # three phones, one score
        # ids[3] has no scores
        ids[4]: utterance(texts[4], word("WE", ["W", "QQ1"], [2.0, 2.0])),  # not ARPABET
    }
    (tmp_path / "resource").mkdir()
    (tmp_path / "resource" / "scores.json").write_text(json.dumps(scores))
    return tmp_path


def test_a_scored_utterance_has_its_scores_words_phones_and_audio(corpus):
    report = SkipReport()
    [first] = list(iter_speechocean(corpus, "train", report))

    assert (first.id, first.text, first.speaker) == ("000010011", "WE CALL IT BEAR", "0001")
    assert first.scores == {
        "accuracy": 8.0,
        "completeness": 10.0,
        "fluency": 9.0,
        "prosodic": 9.0,
        "total": 8.0,
    }
    assert [w.text for w in first.words] == ["WE", "CALL", "IT", "BEAR"]
    assert first.words[1].phones == ("K", "AO", "L") and first.words[1].phone_accuracy == (2.0, 1.0, 0.0)
    assert Path(first.audio_path) == corpus / "WAVE" / "SPEAKER0001" / "000010011.WAV"
    assert Path(first.audio_path).is_file()


def test_every_bad_row_is_a_counted_skip_naming_where(corpus):
    report = SkipReport()
    list(iter_speechocean(corpus, "train", report))

    summary = report.to_dict()
    assert (summary["seen"], summary["kept"]) == (5, 1)
    assert summary["skipped_by_reason"] == {
        "scores name other words": 1,
        "malformed scores": 2,
        "no scores": 1,
    }
    assert "scores.json:000010013" in " ".join(summary["first_skipped"]["malformed scores"])
    assert any(
        "'QQ1' is not an ARPABET phone" in line for line in summary["first_skipped"]["malformed scores"]
    )
    assert "train/text:4" in summary["first_skipped"]["no scores"][0]


def test_strict_mode_stops_at_the_first_bad_row_and_a_folder_without_scores_is_refused(corpus, tmp_path):
    with pytest.raises(InputError, match="scores name other words"):
        list(iter_speechocean(corpus, "train", SkipReport(strict=True)))
    with pytest.raises(FileNotFoundError, match="not a SpeechOcean762 folder"):
        list(iter_speechocean(corpus / "train", "train", SkipReport()))
