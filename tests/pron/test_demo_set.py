"""pron.demo_set: a SpeechOcean762-shaped set the reader takes whole, the same bytes for the same params, test
voices no training utterance uses, mispronounced words in about the asked share, and audio that says them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asr_pipeline.io.report import SkipReport
from asr_pipeline.pron.demo_set import PronDemoParams, build_pron_demo_set
from asr_pipeline.pron.speechocean import iter_speechocean

PARAMS = PronDemoParams(train_size=40, test_size=12, mispronounced_share=0.3, seed=3)


@pytest.fixture(scope="module")
def demo_set(tmp_path_factory) -> tuple[Path, dict[str, bytes]]:
    files = build_pron_demo_set(PARAMS)
    root = tmp_path_factory.mktemp("pron_demo")
    for name, content in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content)
    return root, files


def test_the_speechocean_reader_takes_every_utterance(demo_set):
    root, _ = demo_set
    for split, size in (("train", 40), ("test", 12)):
        report = SkipReport(strict=True)
        utterances = list(iter_speechocean(root, split, report))
        assert len(utterances) == size and report.skipped == 0
        assert all(Path(u.audio_path).is_file() for u in utterances)


def test_the_same_params_give_the_same_bytes(demo_set):
    _, files = demo_set
    assert build_pron_demo_set(PARAMS) == files


def test_test_voices_are_held_out_and_errors_come_in_about_the_asked_share(demo_set):
    root, _ = demo_set
    scores = json.loads((root / "resource" / "scores.json").read_text())
    voices = {split: {s["voice"]["name"].split("+")[-1] for u, s in scores.items() if u.startswith(prefix)}
              for split, prefix in (("train", "1"), ("test", "2"))}  # fmt: skip
    assert not voices["train"] & voices["test"]
    words = [w for s in scores.values() for w in s["words"]]
    wrong = [w for w in words if w["mispronunciations"]]
    assert 0.15 < len(wrong) / len(words) < 0.45
    assert all(
        min(w["phones-accuracy"]) < 2 or w["mispronunciations"][0]["kind"] == "insertion" for w in wrong
    )
    assert all(w["accuracy"] == 10 for w in words if not w["mispronunciations"])


def test_bad_params_are_refused_naming_the_key():
    with pytest.raises(ValueError, match=r"pron.demo: error_weights takes positive weights of"):
        PronDemoParams(error_weights={"swap": 1.0})
