"""Phone items of a voiced manifest: rows without a voice and files that are not their resynthesis are counted;
the item file and the 50 Hz phone labels follow the synthesizer's phoneme events."""

import json
import shutil

import numpy as np
import pytest

from asr_pipeline.demo.phones import PhoneAlignment, PhoneSegment
from asr_pipeline.demo.synthesis import Voice, synthesize
from asr_pipeline.hubert.phone_items import (
    ITEM_HEADER,
    align_split,
    frame_phones,
    item_lines,
    phone_inventory,
    voice_from,
    voiced_utterances,
)
from asr_pipeline.io.report import SkipReport

needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")
RATE = 22050


def alignment(*segments: tuple[str, int, int]) -> PhoneAlignment:
    total = segments[-1][2]
    return PhoneAlignment(np.zeros(total, dtype=np.int16), tuple(PhoneSegment(*s) for s in segments))


def test_a_voice_name_with_and_without_a_variant():
    assert voice_from("en-us+m3", 170, 40) == Voice("en-us", "m3", 170, 40)
    assert voice_from("en-gb-scotland", 120, 99) == Voice("en-gb-scotland", None, 120, 99)


def test_the_item_file_lists_every_spoken_phone_with_its_neighbours_and_speaker():
    aligned = {
        "u2": alignment(("_", 0, 441), ("h", 441, 1323), ("@", 1323, 2205), ("_:", 2205, 2646)),
        "u1": alignment(("D", 0, 882), ("@", 882, 1764)),
    }
    lines = item_lines(aligned, {"u1": "en-us+m3", "u2": "en-gb"})

    assert lines == [
        ITEM_HEADER,
        "u1 0.0000 0.0400 D SIL @ en-us+m3",
        "u1 0.0400 0.0800 @ D SIL en-us+m3",
        "u2 0.0200 0.0600 h SIL @ en-gb",
        "u2 0.0600 0.1000 @ h SIL en-gb",
    ]


def test_frame_labels_take_the_phone_at_each_20_ms_frame_centre_and_mark_pauses():
    aligned = {"u": alignment(("_", 0, 441), ("h", 441, 1323), ("@", 1323, 2205), ("_:", 2205, 2646))}
    inventory = phone_inventory(aligned.values())
    assert inventory == {"@": 0, "h": 1}
    labels = frame_phones(aligned, inventory)["u"]
    # 2646 samples = 0.12 s = 6 frames; centres at 10, 30, ... 110 ms; h spans 20-60 ms, @ 60-100 ms
    assert labels.tolist() == [-1, 1, 1, 0, 0, -1]


def write_manifest(tmp_path, rows):
    path = tmp_path / "dev.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows) + "\n")
    return path


def test_rows_without_their_voice_are_counted_not_guessed(tmp_path):
    path = write_manifest(
        tmp_path,
        [
            {
                "id": "a",
                "audio_path": "a.wav",
                "text": "hi",
                "speaker": "en-us",
                "rate_wpm": 150,
                "pitch": 50,
            },
            {"id": "b", "audio_path": "b.wav", "text": "hi"},
            {
                "id": "c",
                "audio_path": "c.wav",
                "text": "hi",
                "speaker": "en-us",
                "rate_wpm": "fast",
                "pitch": 5,
            },
        ],
    )
    report = SkipReport()
    rows = voiced_utterances(path, report)
    assert [row.id for row in rows] == ["a"] and rows[0].audio_path == tmp_path / "a.wav"
    summary = report.to_dict()
    assert summary["seen"] == 3 and summary["skipped_by_reason"] == {"no espeak voice": 2}
    assert summary["first_skipped"]["no espeak voice"][0].startswith(f"{path}:2")


@needs_espeak
def test_a_file_that_is_not_its_resynthesis_is_a_counted_skip(tmp_path):
    voices = {"a": Voice("en-us", "f2", 180, 60), "b": Voice("en-gb", "m3", 140, 30)}
    rows = []
    for utterance, voice in voices.items():
        (tmp_path / f"{utterance}.wav").write_bytes(synthesize("the train leaves at noon", voice))
        rows.append({"id": utterance, "audio_path": f"{utterance}.wav", "text": "the train leaves at noon",
                     "speaker": voice.espeak_name, "rate_wpm": voice.rate_wpm, "pitch": voice.pitch})  # fmt: skip
    rows[1]["pitch"] = 31  # the manifest claims another pitch than b.wav was spoken with
    report = SkipReport()

    aligned = align_split(voiced_utterances(write_manifest(tmp_path, rows), report), report, jobs=2)

    assert list(aligned) == ["a"]
    summary = report.to_dict()
    assert (summary["seen"], summary["kept"]) == (2, 1)
    assert summary["skipped_by_reason"] == {"audio differs from its resynthesis": 1}
    spoken = [s.phone for s in aligned["a"].segments if not s.is_pause]
    assert spoken[0] == "D" and spoken[1].startswith("@")  # "the"
