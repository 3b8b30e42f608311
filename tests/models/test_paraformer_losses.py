"""models.paraformer_losses: the glancing sampler's choice, the label-smoothed cross-entropy over real tokens,
per-utterance CTC, the forced alignment's token starts and the boundary loss, each per utterance over its real
tokens or frames."""

import torch
import torch.nn.functional as F

from asr_pipeline.models.paraformer_losses import (
    boundary_loss,
    ctc_per_utterance,
    ctc_token_starts,
    glancing_mask,
    token_cross_entropy,
)


def test_glancing_replaces_a_share_of_the_first_passs_errors_at_random_real_positions():
    targets = torch.tensor([[1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4, 5, 0, 0, 0], [4, 4, 4, 4, 0, 0, 0, 0]])
    target_lengths = torch.tensor([8, 5, 4])
    predictions = targets.clone()
    predictions[0, :6] = 9  # 6 wrong -> floor(0.5 * 6) = 3 glanced
    predictions[1, :3] = 9  # 3 wrong -> 1; row 2 is perfect -> 0
    predictions[1, 6:] = 9  # wrong only at padding: does not count

    masks = [
        glancing_mask(predictions, targets, target_lengths, 0.5, torch.Generator().manual_seed(seed))
        for seed in (0, 0, 1)
    ]

    assert masks[0].sum(1).tolist() == [3, 1, 0]
    assert torch.equal(masks[0], masks[1]), "the same seed draws the same positions"
    assert masks[2].sum(1).tolist() == [3, 1, 0]
    assert not torch.equal(masks[0], masks[2]), "another seed draws other positions"
    assert not (masks[0][1, 5:] | masks[2][1, 5:]).any(), "padding is never glanced at"
    assert not glancing_mask(predictions, targets, target_lengths, 0.0).any()


def test_the_cross_entropy_ignores_padding_and_spreads_smoothing_over_real_tokens():
    log_probs = torch.randn(2, 3, 5).index_fill(-1, torch.tensor([0]), float("-inf")).log_softmax(-1)
    targets, target_lengths = torch.tensor([[1, 2, 3], [4, 0, 0]]), torch.tensor([3, 1])

    plain = token_cross_entropy(log_probs, targets, target_lengths, 0.0, blank_id=0)
    smoothed = token_cross_entropy(log_probs, targets, target_lengths, 0.2, blank_id=0)

    nll = -log_probs.gather(-1, targets[..., None]).squeeze(-1)
    torch.testing.assert_close(plain, torch.stack([nll[0].sum(), nll[1, 0]]))
    uniform = -log_probs[..., 1:].mean(-1)  # the 4 non-blank tokens
    torch.testing.assert_close(
        smoothed,
        torch.stack([(0.8 * nll[0] + 0.2 * uniform[0]).sum(), 0.8 * nll[1, 0] + 0.2 * uniform[1, 0]]),
    )


def test_ctc_token_starts_are_where_each_forced_aligned_token_begins():
    # Frames:  0 1 2 3 4 5 6 7; the posteriors favour the path  a a _ b _ b b _  (a = 1, b = 2).
    path = [1, 1, 0, 2, 0, 2, 2, 0]
    log_probs = torch.full((2, 8, 3), -10.0)
    log_probs[0, torch.arange(8), torch.tensor(path)] = 0.0
    log_probs = log_probs.log_softmax(-1)
    targets, target_lengths = torch.tensor([[1, 2, 2], [2, 2, 2]]), torch.tensor([3, 3])
    lengths = torch.tensor([8, 4])  # row 1: 3 tokens with 2 repeats need 5 frames

    starts, aligned = ctc_token_starts(log_probs, lengths, targets, target_lengths, blank_id=0)

    assert starts[0].nonzero().flatten().tolist() == [0, 3, 5]
    assert aligned.tolist() == [True, False] and not starts[1].any()


def test_ctc_per_utterance_is_torchs_ctc_per_row_and_zero_where_no_alignment_fits():
    generator = torch.Generator().manual_seed(0)
    log_probs = torch.randn(2, 6, 4, generator=generator).log_softmax(-1)  # (B, T', V)
    targets, target_lengths = torch.tensor([[1, 2, 3], [1, 1, 1]]), torch.tensor([3, 3])
    lengths = torch.tensor([6, 4])  # row 1: 3 equal tokens need 5 frames (a blank between repeats)
    losses = ctc_per_utterance(log_probs, lengths, targets, target_lengths, blank_id=0)
    expected = F.ctc_loss(
        log_probs[:1].transpose(0, 1), targets[:1], lengths[:1], target_lengths[:1], reduction="sum"
    )
    torch.testing.assert_close(losses[0], expected)
    assert losses[1].item() == 0.0


def test_the_boundary_loss_sums_binary_cross_entropy_over_real_frames_only():
    logits = torch.tensor([[2.0, -1.0, 0.0], [0.5, 9.0, 9.0]])
    targets = torch.tensor([[True, False, True], [False, True, True]])
    losses = boundary_loss(logits, targets, torch.tensor([3, 1]))
    per_frame = F.binary_cross_entropy_with_logits(logits, targets.float(), reduction="none")
    torch.testing.assert_close(losses, torch.stack([per_frame[0].sum(), per_frame[1, 0]]))
