"""modules.forced_alignment: each row's best CTC path that collapses to its tokens, blank past its length; a row
too short for its tokens stays blank and unaligned; a target holding the blank is refused."""

from __future__ import annotations

import pytest
import torch

from asr_pipeline.modules.forced_alignment import forced_paths, min_frames

BLANK = 0


def collapse(path: list[int]) -> list[int]:
    return [t for t in torch.unique_consecutive(torch.tensor(path)).tolist() if t != BLANK]


def test_min_frames_is_one_per_token_plus_a_blank_between_repeats():
    assert min_frames(torch.tensor([], dtype=torch.long)) == 0
    assert min_frames(torch.tensor([5])) == 1
    assert min_frames(torch.tensor([3, 3, 4, 4, 4])) == 5 + 3


def test_a_peaked_posterior_gives_its_own_path_and_the_path_collapses_to_the_tokens():
    # frames 0-5 say: blank 2 2 blank 3 blank
    peaks = [BLANK, 2, 2, BLANK, 3, BLANK]
    log_probs = torch.full((1, 8, 5), -10.0)
    for frame, token in enumerate(peaks):
        log_probs[0, frame, token] = 0.0
    log_probs = log_probs.log_softmax(-1)

    paths, aligned, scores = forced_paths(
        log_probs, torch.tensor([6]), torch.tensor([[2, 3]]), torch.tensor([2]), blank=BLANK
    )

    assert paths[0].tolist() == [*peaks, BLANK, BLANK]  # past the length: blank
    assert aligned.tolist() == [True]
    torch.testing.assert_close(scores[0], log_probs[0, torch.arange(6), torch.tensor(peaks)].sum())


def test_a_row_too_short_for_its_tokens_stays_blank_and_unaligned_while_the_others_align():
    torch.manual_seed(0)
    log_probs = torch.randn(3, 6, 5).log_softmax(-1)
    targets = torch.tensor([[1, 2, 0], [4, 4, 4], [3, 0, 0]])  # row 1: 3 repeats need 5 frames, it has 4

    paths, aligned, scores = forced_paths(
        log_probs, torch.tensor([6, 4, 5]), targets, torch.tensor([2, 3, 0]), blank=BLANK
    )

    assert aligned.tolist() == [True, False, False]  # row 2: no tokens, nothing to align
    assert collapse(paths[0].tolist()) == [1, 2]
    assert paths[1].tolist() == paths[2].tolist() == [BLANK] * 6
    assert scores[0] < 0 and scores[1] == scores[2] == float("-inf")


def test_a_target_holding_the_blank_id_is_refused_naming_the_row_and_token():
    with pytest.raises(ValueError, match="row 0's target contains the blank id 0 at token 1"):
        forced_paths(
            torch.zeros(1, 4, 3).log_softmax(-1),
            torch.tensor([4]),
            torch.tensor([[1, 0]]),
            torch.tensor([2]),
            0,
        )
