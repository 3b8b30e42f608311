import pytest
import torch

from asr_pipeline.decoding.greedy import greedy_decode

BLANK = 0


def one_hot_log_probs(paths: list[list[int]], vocab_size: int = 5) -> torch.Tensor:
    """(B, T, V) log-probs whose argmax in frame t of utterance b is paths[b][t]."""
    scores = torch.full((len(paths), len(paths[0]), vocab_size), -5.0)
    for b, path in enumerate(paths):
        for t, token in enumerate(path):
            scores[b, t, token] = -0.1
    return scores


def lengths_of(*values: int) -> torch.Tensor:
    return torch.tensor(values)


def test_repeated_outputs_collapse_to_one():
    assert greedy_decode(one_hot_log_probs([[1, 1, 1, 2, 2]]), lengths_of(5)) == [[1, 2]]


def test_a_blank_between_equal_outputs_keeps_both():
    assert greedy_decode(one_hot_log_probs([[1, BLANK, 1]]), lengths_of(3)) == [[1, 1]]


def test_blanks_are_dropped():
    assert greedy_decode(one_hot_log_probs([[BLANK, 3, BLANK, BLANK, 4, BLANK]]), lengths_of(6)) == [[3, 4]]
    assert greedy_decode(one_hot_log_probs([[BLANK, BLANK]]), lengths_of(2)) == [[]]


def test_frames_past_the_length_are_ignored():
    paths = [[1, 2, 3, 4], [2, 2, 3, 3]]
    assert greedy_decode(one_hot_log_probs(paths), lengths_of(2, 3)) == [[1, 2], [2, 3]]
    assert greedy_decode(one_hot_log_probs(paths), lengths_of(0, 4)) == [[], [2, 3]]


def test_blank_id_is_configurable():
    # With blank 4, output 0 is an ordinary token.
    assert greedy_decode(one_hot_log_probs([[0, 4, 0, 0, 4]]), lengths_of(5), blank_id=4) == [[0, 0]]


def test_lengths_longer_than_the_frames_are_rejected():
    with pytest.raises(ValueError, match=r"lengths must lie in \[0, T=3\]"):
        greedy_decode(one_hot_log_probs([[1, 2, 3]]), lengths_of(4))


def test_per_token_posteriors_keep_repeats_when_not_collapsed():
    # A Paraformer decoder's (B, U, V): one position per token, so "l l" in "hello" stays two tokens.
    log_probs = one_hot_log_probs([[1, 1, 2, 3], [4, 4, 4, 0]])
    assert greedy_decode(log_probs, lengths_of(4, 3), collapse=False) == [[1, 1, 2, 3], [4, 4, 4]]
    assert greedy_decode(log_probs, lengths_of(4, 3)) == [[1, 2, 3], [4]]
