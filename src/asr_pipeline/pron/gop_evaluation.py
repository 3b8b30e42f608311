"""The GOP baseline against human scores: every scored utterance of a SpeechOcean762-layout set (ours: the
pronunciation demo set) through an aligner, its canonical phones scored by ``pron.gop``, and the agreement with
the labels at three levels (``pron.evaluation``):

    phone      GOP of each canonical phone        vs its accuracy label (0-2)
    word       mean GOP of the word's phones      vs the word's accuracy (0-10)
    utterance  mean of the word GOPs              vs the utterance's accuracy (0-10)

An utterance whose audio cannot be featurized or whose frames cannot hold its phones is skipped and counted.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from asr_pipeline.features.extract import featurize_audio
from asr_pipeline.features.frontends import Frontend
from asr_pipeline.io.report import SkipReport
from asr_pipeline.pron.evaluation import correlations
from asr_pipeline.pron.gop import gop_scores, word_scores
from asr_pipeline.pron.speechocean import ScoredUtterance
from asr_pipeline.text.phones import phone_ids

LEVELS = ("phone", "word", "utterance")


@torch.no_grad()
def gop_agreement(
    model: nn.Module,
    utterances: Iterable[ScoredUtterance],
    frontend: Frontend,
    report: SkipReport,
    resamples: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """{level: correlations(...)} for the three levels, and the mean GOP of phones labelled 2, 1 and 0. ``report``
    counts the utterances scored (seen, kept, skipped with the reason); reading them is the reader's to count."""
    model.eval()
    pairs: dict[str, tuple[list[float], list[float]]] = {level: ([], []) for level in LEVELS}
    by_label: dict[int, list[float]] = {0: [], 1: [], 2: []}
    for utterance in utterances:
        report.seen += 1
        outcome = featurize_audio(utterance.audio_path, frontend, None)
        if outcome.features is None:
            report.skip(outcome.skip_reason or "no features", utterance.location, outcome.skip_detail)
            continue
        features = torch.from_numpy(outcome.features)[None]  # (1, T, F)
        log_probs, _ = model(features, torch.tensor([features.shape[1]]))
        canonical = [phone for word in utterance.words for phone in word.phones]
        scores = gop_scores(log_probs[0], phone_ids(canonical))
        if scores is None:
            report.skip("too few frames for its phones", utterance.location, f"{len(canonical)} phones")
            continue
        report.kept += 1
        labels = [label for word in utterance.words for label in word.phone_accuracy]
        for score, label in zip(scores, labels, strict=True):
            _add(pairs["phone"], score.gop, label)
            by_label[round(label)].append(score.gop)
        words = word_scores(scores, [len(word.phones) for word in utterance.words])
        for gop, word in zip(words, utterance.words, strict=True):
            _add(pairs["word"], gop, word.accuracy)
        _add(pairs["utterance"], sum(words) / len(words), utterance.scores["accuracy"])
    report.require_kept("GOP scores")
    result: dict[str, Any] = {
        level: correlations(*pairs[level], resamples=resamples, seed=seed) for level in LEVELS
    }
    result["mean_gop_by_label"] = {
        str(k): round(sum(v) / len(v), 4) if v else None for k, v in by_label.items()
    }
    return result


def _add(pair: tuple[list[float], list[float]], predicted: float, human: float) -> None:
    pair[0].append(predicted)
    pair[1].append(human)


__all__ = ["LEVELS", "gop_agreement"]
