"""What every CTC model test runs: the few-step overfit and the output contract checks, the model and its batch
passed in. A model here maps ``(features (B, T, F), lengths (B,))`` to ``(log_probs (B, T', V), out_lengths
(B,))`` and has ``output_lengths(lengths)``."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn


def ctc_overfit_losses(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: tuple[Tensor, Tensor, Tensor, Tensor],
    steps: int,
) -> list[float]:
    """The CTC loss of each of ``steps`` optimizer steps on one ``(features, lengths, targets,
    target_lengths)`` batch."""
    features, lengths, targets, target_lengths = batch
    losses = []
    for _ in range(steps):
        log_probs, out_lengths = model(features, lengths)  # (B, T', V), (B,)
        loss = F.ctc_loss(log_probs.transpose(0, 1), targets, out_lengths, target_lengths)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def assert_ctc_outputs(
    model: nn.Module, features: Tensor, lengths: Tensor, expected: list[int], vocab_size: int
):
    """The forward pass gives ``expected`` output lengths (int64, the same as ``output_lengths``), log-probs
    padded to the longest of them, and each frame's probabilities sum to 1."""
    log_probs, out_lengths = model(features, lengths)  # (B, T', V), (B,)

    assert log_probs.shape == (len(expected), max(expected), vocab_size)
    assert out_lengths.tolist() == expected
    assert out_lengths.dtype == torch.int64
    assert model.output_lengths(lengths).tolist() == expected
    torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(len(expected), max(expected)))


def assert_padding_is_ignored(model: nn.Module, lengths: list[int], input_dim: int) -> None:
    """Each example of a padded batch, loud garbage in its padding, gives the outputs it gives alone (the model
    in eval mode)."""
    longest = max(lengths)
    features = torch.randn(len(lengths), longest, input_dim)
    for b, length in enumerate(lengths):
        features[b, length:] = 50 * torch.randn(longest - length, input_dim)

    with torch.no_grad():
        batched, out_lengths = model(features, torch.tensor(lengths))
        for b, length in enumerate(lengths):
            alone, alone_length = model(features[b : b + 1, :length], torch.tensor([length]))
            assert alone_length.item() == out_lengths[b].item()
            torch.testing.assert_close(batched[b, : out_lengths[b]], alone[0], atol=1e-5, rtol=1e-5)


def ctc_loss(model: nn.Module, features: Tensor, lengths: Tensor) -> Tensor:
    """The CTC loss of a batch of at most two examples against fixed targets of 4 and 3 tokens."""
    log_probs, out_lengths = model(features, lengths)  # (B, T', V), (B,)
    targets = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8]])[: len(lengths)]
    target_lengths = torch.tensor([4, 3])[: len(lengths)]
    return F.ctc_loss(log_probs.transpose(0, 1), targets, out_lengths, target_lengths)


def parameters_without_gradient(model: nn.Module, input_dim: int) -> list[str]:
    """The names of the parameters that a CTC loss on a two-example batch (61 and 40 frames) leaves with no
    gradient, or an all-zero one."""
    ctc_loss(model, torch.randn(2, 61, input_dim), torch.tensor([61, 40])).backward()
    return [name for name, p in model.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]


def assert_wrong_feature_width_names_the_fix(model: nn.Module) -> None:
    """80-wide features (a model built for another width) fail with an error that names ``input_dim``."""
    with pytest.raises(ValueError, match="input_dim"):
        model(torch.randn(1, 10, 80), torch.tensor([10]))


def assert_float32_log_probs_under_bf16_autocast(model: nn.Module, input_dim: int) -> None:
    """Under bf16 autocast the log-probs still come out in float32 (CTC sums probabilities over many alignments)."""
    with torch.autocast("cpu", dtype=torch.bfloat16):
        log_probs, _ = model.eval()(torch.randn(1, 29, input_dim), torch.tensor([29]))
    assert log_probs.dtype == torch.float32
