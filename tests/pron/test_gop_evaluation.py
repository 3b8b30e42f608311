"""pron.gop_evaluation: every scored utterance goes through the aligner once; each canonical phone, word and
utterance gives one GOP beside its human score; audio that cannot be read and utterances too short for their
phones are skipped and counted; GOP means are grouped by the phones' labels."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
import torch

from asr_pipeline.features.frontends import frontend_named
from asr_pipeline.io.report import NothingKeptError, SkipReport
from asr_pipeline.models.speech_aligner import SpeechAligner, speech_aligner_config
from asr_pipeline.pron.gop_evaluation import LEVELS, gop_agreement
from asr_pipeline.pron.speechocean import ScoredUtterance, WordScore

RATE = 16000


def word(text: str, phones: tuple[str, ...], labels: tuple[float, ...], accuracy: float) -> WordScore:
    return WordScore(text, accuracy, 10.0, accuracy, phones, labels)


def utterance(tmp_path, name: str, seconds: float, accuracy: float, seed: int) -> ScoredUtterance:
    path = tmp_path / f"{name}.wav"
    if seconds > 0:
        noise = 0.1 * np.random.default_rng(seed).standard_normal(int(seconds * RATE))
        sf.write(path, noise.astype(np.float32), RATE)
    words = (
        word("cat", ("K", "AE", "T"), (2.0, 1.0, 2.0), accuracy),
        word("sat", ("S", "AE", "T"), (0.0, 2.0, 2.0), accuracy - 1),
    )
    return ScoredUtterance(name, f"{name}.wav", str(path), "cat sat", None, {"accuracy": accuracy}, words)


@pytest.fixture(scope="module")
def aligner():
    torch.manual_seed(0)
    return SpeechAligner(speech_aligner_config("tiny"))


def test_each_level_pairs_one_gop_with_one_human_score_and_skips_are_counted(tmp_path, aligner):
    utterances = [utterance(tmp_path, f"u{i}", 0.6, accuracy=4.0 + i, seed=i) for i in range(4)]
    utterances.append(utterance(tmp_path, "missing", 0.0, accuracy=5.0, seed=9))  # no file
    utterances.append(utterance(tmp_path, "short", 0.045, accuracy=5.0, seed=9))  # 3 frames for 6 phones
    report = SkipReport()

    result = gop_agreement(aligner, utterances, frontend_named("mfcc"), report, resamples=50)

    assert (report.seen, report.kept, report.skipped) == (6, 4, 2)
    assert dict(report.counts) == {"missing file": 1, "too few frames for its phones": 1}
    # 4 utterances x 2 words x 3 phones
    assert [result[level]["items"] for level in LEVELS] == [24, 8, 4]
    assert -1.0 <= result["utterance"]["spearman"] <= 1.0
    assert set(result["mean_gop_by_label"]) == {"0", "1", "2"}
    assert all(isinstance(v, float) for v in result["mean_gop_by_label"].values())


def test_nothing_scored_is_an_error_naming_what_was_not_made(tmp_path, aligner):
    with pytest.raises(NothingKeptError, match="GOP scores"):
        gop_agreement(
            aligner, [utterance(tmp_path, "short", 0.045, 5.0, 1)], frontend_named("mfcc"), SkipReport()
        )
