"""GOP (pron.gop): canonical phones force-aligned to CTC posteriors, scored per segment; a phone spoken as
another scores far below one spoken as written."""

from __future__ import annotations

import pytest
import torch

from asr_pipeline.pron.gop import gop_scores, phone_segments, word_scores

V = 12  # blank + 11 classes


def posteriors(spoken: list[tuple[int, int]]) -> torch.Tensor:
    """(T, V) log-probs: for each (phone, frames), frames whose best non-blank class is that phone (blank 0 gets
    most of the mass, as a CTC model's does), with a blank frame between phones."""
    rows = []
    for phone, frames in spoken:
        for _ in range(frames):
            logits = torch.full((V,), -4.0)
            logits[0], logits[phone] = 2.0, 1.5
            rows.append(logits)
        blank = torch.full((V,), -4.0)
        blank[0] = 5.0
        rows.append(blank)
    return torch.stack(rows).log_softmax(-1)


def test_a_ctc_path_splits_into_one_segment_per_token_in_order():
    assert phone_segments([0, 5, 5, 0, 7, 7, 7, 0, 0, 7, 3]) == [
        (5, 1, 3),
        (7, 4, 7),
        (7, 9, 10),
        (3, 10, 11),
    ]
    assert phone_segments([0, 0]) == []


def test_phones_spoken_as_written_score_near_zero_and_a_substituted_one_far_below():
    log_probs = posteriors([(5, 4), (7, 5), (3, 3)])  # spoken: 5 7 3

    right = gop_scores(log_probs, [5, 7, 3])
    wrong = gop_scores(log_probs, [5, 9, 3])  # the learner said 7 where 9 was expected

    assert right is not None and wrong is not None
    # A CTC path spikes: each phone holds the frame(s) it labels, blank the rest of the spoken frames.
    assert [(s.phone_id, s.start) for s in right] == [(5, 0), (7, 5), (3, 11)]
    assert all(s.gop == pytest.approx(0.0, abs=1e-6) for s in right)  # each phone was the best class
    assert wrong[1].gop < -4.0 and wrong[1].lpp < right[1].lpp - 4.0
    assert wrong[0].gop == pytest.approx(0.0, abs=1e-6) and wrong[2].gop == pytest.approx(0.0, abs=1e-6)
    assert word_scores(wrong, [1, 2]) == pytest.approx([wrong[0].gop, (wrong[1].gop + wrong[2].gop) / 2])


def test_an_utterance_too_short_for_its_phones_has_no_scores():
    assert gop_scores(posteriors([(5, 1)])[:2], [5, 5, 5]) is None
    assert gop_scores(posteriors([(5, 2)]), []) is None
    with pytest.raises(ValueError, match="3 phones in the words but 2 phone scores"):
        word_scores(gop_scores(posteriors([(5, 2), (6, 2)]), [5, 6]), [1, 2])
