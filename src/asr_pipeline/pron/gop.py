"""Goodness of pronunciation (GOP) from the aligner's CTC posteriors over forced-aligned phone segments.

The canonical phones of the known text are force-aligned to the utterance's frame log-probs
(``modules.forced_alignment``: torchaudio's CTC Viterbi); each phone gets the frames its path labels with it
(a CTC model's paths spike: usually one to three frames a phone, blank elsewhere, so the score reads the
frames where the model commits to a phone).
Over those frames, with the posteriors renormalised over the phones (the blank removed: a CTC model puts most
of every frame's mass on blank, which says nothing about which phone was spoken):

    LPP(p) = mean_t log P(p | x_t)                               the log posterior probability of the phone
    GOP(p) = mean_t [log P(p | x_t) - max_q log P(q | x_t)]       the log posterior ratio against the best
                                                                   competing phone (<= 0; 0: p was the best)

(Witt & Young 2000; the DNN form of Hu et al. 2015, "Improved mispronunciation detection with deep neural
network trained acoustic models and transfer learning based logistic regression classifiers".) A word's score is
the mean of its phones', an utterance's the mean of its words'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from asr_pipeline.modules.forced_alignment import forced_paths, min_frames
from asr_pipeline.text.phones import BLANK_ID


@dataclass(frozen=True)
class PhoneScore:
    phone_id: int
    start: int  # first frame of the segment
    end: int  # one past its last frame
    lpp: float
    gop: float


def phone_segments(path: Sequence[int], blank: int = BLANK_ID) -> list[tuple[int, int, int]]:
    """(token, start, end) of each token of a CTC path, in order: a token's frames run until a blank or another
    token (a repeated token needs a blank between, so two segments of it never touch)."""
    segments: list[tuple[int, int, int]] = []
    previous = blank
    for frame, label in enumerate(path):
        if label != blank and label != previous:
            segments.append((label, frame, frame + 1))
        elif label != blank:
            token, start, _ = segments[-1]
            segments[-1] = (token, start, frame + 1)
        previous = label
    return segments


@torch.no_grad()
def gop_scores(log_probs: Tensor, phone_ids: Sequence[int], blank: int = BLANK_ID) -> list[PhoneScore] | None:
    """Per canonical phone: its segment, LPP and GOP (module docstring). ``log_probs``: (T, V) CTC log-probs of
    one utterance. None when its T frames cannot hold the phones (too short an utterance: counted by the caller)."""
    targets = torch.tensor(list(phone_ids), dtype=torch.long)
    frames = log_probs.shape[0]
    if not len(phone_ids) or frames < min_frames(targets):
        return None
    paths, aligned, _ = forced_paths(
        log_probs[None].float(), torch.tensor([frames]), targets[None], torch.tensor([len(phone_ids)]), blank
    )
    if not bool(aligned[0]):
        return None
    segments = phone_segments(paths[0].tolist(), blank)
    assert [token for token, _, _ in segments] == list(phone_ids), "a Viterbi path spells its targets"
    phones = torch.cat([log_probs[:, :blank], log_probs[:, blank + 1 :]], dim=1).float()  # (T, V-1): no blank
    phones = phones.log_softmax(-1)
    best = phones.max(-1).values  # (T,)
    scores = []
    for token, start, end in segments:
        column = token - 1 if token > blank else token
        own = phones[start:end, column]  # (frames of the segment,)
        scores.append(PhoneScore(token, start, end, float(own.mean()), float((own - best[start:end]).mean())))
    return scores


def word_scores(phone_scores: Sequence[PhoneScore], phones_per_word: Sequence[int]) -> list[float]:
    """Each word's GOP: the mean of its phones' (``phones_per_word``: how many phones each word has, in order)."""
    if sum(phones_per_word) != len(phone_scores):
        raise ValueError(f"{sum(phones_per_word)} phones in the words but {len(phone_scores)} phone scores")
    words, start = [], 0
    for count in phones_per_word:
        words.append(sum(s.gop for s in phone_scores[start : start + count]) / max(count, 1))
        start += count
    return words


__all__ = ["PhoneScore", "gop_scores", "phone_segments", "word_scores"]
