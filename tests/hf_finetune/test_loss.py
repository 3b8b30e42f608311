"""The autoregressive loss counts the transcript tokens only, each predicted from the position before."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from asr_pipeline.hf_finetune.collate import IGNORE_INDEX
from asr_pipeline.hf_finetune.loss import next_token_loss, perplexity


def test_loss_is_the_cross_entropy_of_each_labelled_token_from_the_previous_position():
    torch.manual_seed(0)
    logits = torch.randn(2, 5, 7)  # (B, L, V)
    labels = torch.tensor([[IGNORE_INDEX, IGNORE_INDEX, 3, 4, IGNORE_INDEX], [IGNORE_INDEX, 1, 2, 6, 0]])
    total, tokens = next_token_loss(logits, labels)
    pairs = [
        (0, 1, 3),
        (0, 2, 4),
        (1, 0, 1),
        (1, 1, 2),
        (1, 2, 6),
        (1, 3, 0),
    ]  # (b, predicting position, token)
    expected = sum(F.cross_entropy(logits[b, i][None], torch.tensor([t])) for b, i, t in pairs)
    assert tokens == 6
    assert torch.allclose(total, expected)


def test_perplexity_is_exp_of_the_loss_and_saturates():
    assert math.isclose(perplexity(math.log(12.0)), 12.0)
    assert perplexity(1e4) == math.inf
