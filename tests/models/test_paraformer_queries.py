import logging

import pytest
import torch
from torchaudio.functional import forced_align

from asr_pipeline.models import paraformer_queries
from asr_pipeline.models.paraformer_queries import (
    greedy_queries,
    path_segments,
    uniform_queries,
    viterbi_queries,
)

BLANK = 0


def posteriors_for(*paths: list[int], classes: int = 5, sharpness: float = 6.0) -> torch.Tensor:
    """(B, T, C) CTC log-probs whose best label at frame t is paths[b][t]; shorter paths padded with blank."""
    frames = max(len(path) for path in paths)
    labels = torch.tensor([path + [BLANK] * (frames - len(path)) for path in paths])
    return (sharpness * torch.nn.functional.one_hot(labels, classes).float()).log_softmax(-1)


def ramp(batch: int, frames: int, dim: int = 2) -> torch.Tensor:
    """(B, T, D) hidden whose frame t is [t, 10 t, ...] in every row, so averages read as frame indices."""
    scale = 10.0 ** torch.arange(dim)
    return (torch.arange(float(frames))[:, None] * scale).expand(batch, frames, dim).contiguous()


def reference_segments(path: list[int], blank: int) -> list[tuple[int, list[int]]]:
    """The token and frames of each run of one non-blank label, by hand."""
    segments, previous = [], blank
    for frame, label in enumerate(path):
        if label != blank and label == previous:
            segments[-1][1].append(frame)
        elif label != blank:
            segments.append((label, [frame]))
        previous = label
    return segments


def reference_queries(hidden: torch.Tensor, segments: list[tuple[int, list[int]]], columns: int):
    """(U, D) the mean of each segment's frames, zero rows up to ``columns``."""
    queries = torch.zeros(columns, hidden.size(-1))
    for token, (_, frames) in enumerate(segments):
        queries[token] = hidden[frames].mean(0)
    return queries


# --- uniform ----------------------------------------------------------------------------------------------------


def test_uniform_splits_frames_at_floor_of_j_times_t_over_u():
    # 7 frames, 3 tokens: boundaries floor(0), floor(7/3) = 2, floor(14/3) = 4, 7 -> frames {0,1} {2,3} {4,5,6}
    # 4 frames, 4 tokens: one frame each; 5 frames, 2 tokens: {0,1} {2,3,4}
    hidden = ramp(3, 7)

    queries = uniform_queries(hidden, torch.tensor([7, 4, 5]), torch.tensor([3, 4, 2]))

    assert queries.shape == (3, 4, 2)
    torch.testing.assert_close(queries[0, :, 0], torch.tensor([0.5, 2.5, 5.0, 0.0]))
    torch.testing.assert_close(queries[1, :, 0], torch.tensor([0.0, 1.0, 2.0, 3.0]))
    torch.testing.assert_close(queries[2, :, 0], torch.tensor([0.5, 3.0, 0.0, 0.0]))
    torch.testing.assert_close(queries[..., 1], 10 * queries[..., 0])


def test_uniform_with_fewer_frames_than_tokens_gives_each_token_the_frame_at_floor_j_times_t_over_u():
    # 2 frames, 5 tokens: floor(2j/5) = 0 0 0 1 1 -- frames shared, no token dropped; no frames -> zeros.
    queries = uniform_queries(ramp(2, 2), torch.tensor([2, 0]), torch.tensor([5, 3]))

    torch.testing.assert_close(queries[0, :, 0], torch.tensor([0.0, 0.0, 0.0, 1.0, 1.0]))
    assert not queries[1].any()


def test_uniform_without_tokens_gives_one_zero_column():
    queries = uniform_queries(torch.randn(2, 6, 3), torch.tensor([6, 4]), torch.tensor([0, 0]))
    assert queries.shape == (2, 1, 3)
    assert not queries.any()


# --- CTC paths --------------------------------------------------------------------------------------------------


def test_path_segments_merge_repeats_drop_blanks_and_split_a_label_repeated_across_a_blank():
    path = torch.tensor([[0, 3, 3, 0, 3, 2, 2, 0], [1, 0, 0, 0, 0, 0, 0, 0]])

    membership, token_ids, token_lengths = path_segments(path, BLANK)

    assert token_lengths.tolist() == [3, 1]
    assert token_ids.tolist() == [[3, 3, 2], [1, 0, 0]]
    assert membership[0].nonzero().tolist() == [[0, 1], [0, 2], [1, 4], [2, 5], [2, 6]]
    assert membership[1].nonzero().tolist() == [[0, 0]]


def test_viterbi_averages_the_frames_the_forced_path_gives_each_reference_token():
    # Best path 0 1 1 0 2 0 2 2 for the reference [1, 2, 2]: token 0 = frames 1,2; token 1 = 4; token 2 = 6,7.
    # The second row's greedy path says [1, 3] at frame 2, but the reference [1, 4] holds it to label 4.
    log_probs = posteriors_for([0, 1, 1, 0, 2, 0, 2, 2], [1, 0, 3, 3, 0])
    log_probs[1, 2:4, 4] = log_probs[1, 2:4, 3] - 1.0  # 4 is the runner-up where 3 wins
    hidden = ramp(2, 8)

    queries = viterbi_queries(
        hidden,
        torch.tensor([8, 5]),
        log_probs,
        torch.tensor([[1, 2, 2], [1, 4, 0]]),
        torch.tensor([3, 2]),
        BLANK,
    )

    torch.testing.assert_close(queries[0, :, 0], torch.tensor([1.5, 4.0, 6.5]))
    torch.testing.assert_close(queries[1, :, 0], torch.tensor([0.0, 2.5, 0.0]))


def test_viterbi_equals_a_hand_written_reference_on_random_posteriors():
    generator = torch.Generator().manual_seed(0)
    lengths = torch.tensor([41, 37, 29, 13])
    target_lengths = torch.tensor([9, 12, 3, 6])
    log_probs = torch.randn(4, 41, 7, generator=generator).mul(3).log_softmax(-1)
    targets = torch.randint(1, 7, (4, 12), generator=generator)
    hidden = torch.randn(4, 41, 5, generator=generator)

    queries = viterbi_queries(hidden, lengths, log_probs, targets, target_lengths, BLANK)

    assert queries.shape == (4, 12, 5)
    for row in range(4):
        frames, tokens = int(lengths[row]), targets[row : row + 1, : target_lengths[row]]
        path, _ = forced_align(log_probs[row : row + 1, :frames], tokens, blank=BLANK)
        segments = reference_segments(path[0].tolist(), BLANK)
        assert [label for label, _ in segments] == tokens[0].tolist()
        torch.testing.assert_close(queries[row], reference_queries(hidden[row], segments, 12))


def test_viterbi_falls_back_to_the_uniform_split_when_frames_are_too_few_and_says_so(caplog, monkeypatch):
    monkeypatch.setattr(paraformer_queries, "_unalignable_rows", 0)  # a fresh process: it warns once
    # Row 0: [1, 1, 2] needs 4 frames (a blank between the repeated 1s) but has 3. Row 1: 3 frames, 4 tokens.
    # Row 2 aligns normally; row 3 has no tokens.
    log_probs = posteriors_for([1, 0, 2], [1, 2, 3], [0, 1, 2, 0], [0, 0])
    lengths = torch.tensor([3, 3, 4, 2])
    targets = torch.tensor([[1, 1, 2, 0], [1, 2, 3, 4], [1, 2, 0, 0], [0, 0, 0, 0]])
    target_lengths = torch.tensor([3, 4, 2, 0])
    hidden = ramp(4, 4)

    with caplog.at_level(logging.WARNING):
        queries = viterbi_queries(hidden, lengths, log_probs, targets, target_lengths, BLANK)

    uniform = uniform_queries(hidden, lengths, target_lengths)
    torch.testing.assert_close(queries[:2], uniform[:2])
    torch.testing.assert_close(queries[0, :3, 0], torch.tensor([0.0, 1.0, 2.0]))
    torch.testing.assert_close(queries[1, :, 0], torch.tensor([0.0, 0.0, 1.0, 2.0]))  # floor(3j/4)
    torch.testing.assert_close(queries[2, :2, 0], torch.tensor([1.0, 2.0]))
    assert not queries[3].any()
    assert "2 of 4 rows have too few frames" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):  # a training run meets it every few batches: said once, then debug
        viterbi_queries(hidden, lengths, log_probs, targets, target_lengths, BLANK)
    assert caplog.text == ""


def test_viterbi_refuses_a_target_that_contains_the_blank():
    with pytest.raises(ValueError, match="row 1's target contains the blank id 0 at token 1"):
        viterbi_queries(
            ramp(2, 5),
            torch.tensor([5, 5]),
            posteriors_for([1, 0, 2, 0, 0], [1, 0, 2, 0, 0]),
            torch.tensor([[1, 2], [1, 0]]),
            torch.tensor([2, 2]),
            BLANK,
        )


# --- greedy -----------------------------------------------------------------------------------------------------


def test_greedy_equals_a_hand_written_reference_on_random_posteriors_and_ignores_padding():
    generator = torch.Generator().manual_seed(1)
    lengths = torch.tensor([53, 40, 1, 0])
    log_probs = torch.randn(4, 53, 6, generator=generator).mul(2).log_softmax(-1)
    log_probs[:, :, BLANK] += 0.5  # blanks common enough to split repeats
    hidden = torch.randn(4, 53, 5, generator=generator)

    queries, token_ids, token_lengths = greedy_queries(hidden, lengths, log_probs, BLANK)

    expected = [
        reference_segments(log_probs[row, :length].argmax(-1).tolist(), BLANK)
        for row, length in enumerate(lengths.tolist())
    ]
    columns = max(1, max(len(segments) for segments in expected))
    assert token_lengths.tolist() == [len(segments) for segments in expected]
    assert queries.shape == (4, columns, 5) and token_ids.shape == (4, columns)
    for row, segments in enumerate(expected):
        labels = [label for label, _ in segments]
        assert token_ids[row].tolist() == labels + [0] * (columns - len(labels))
        torch.testing.assert_close(queries[row], reference_queries(hidden[row], segments, columns))


@pytest.mark.parametrize("mode", ["uniform", "viterbi", "greedy"])
def test_a_padded_batch_equals_each_utterance_alone_and_gradients_reach_only_real_frames(mode):
    generator = torch.Generator().manual_seed(2)
    lengths, target_lengths = torch.tensor([23, 17, 9]), torch.tensor([6, 7, 3])
    log_probs = torch.randn(3, 23, 6, generator=generator).mul(3).log_softmax(-1)
    targets = torch.randint(1, 6, (3, 7), generator=generator)
    hidden = torch.randn(3, 23, 4, generator=generator).requires_grad_()

    def queries_of(hidden, lengths, log_probs, targets, target_lengths):
        if mode == "uniform":
            return uniform_queries(hidden, lengths, target_lengths)
        if mode == "viterbi":
            return viterbi_queries(hidden, lengths, log_probs, targets, target_lengths, BLANK)
        return greedy_queries(hidden, lengths, log_probs, BLANK)[0]

    queries = queries_of(hidden, lengths, log_probs, targets, target_lengths)
    queries.sum().backward()

    for row, length in enumerate(lengths.tolist()):
        alone = queries_of(
            hidden[row : row + 1, :length],
            lengths[row : row + 1],
            log_probs[row : row + 1, :length],
            targets[row : row + 1],
            target_lengths[row : row + 1],
        )
        torch.testing.assert_close(queries[row, : alone.size(1)], alone[0])
        assert not queries[row, alone.size(1) :].any()
        assert not hidden.grad[row, length:].any()
    assert hidden.grad.abs().sum() > 0
