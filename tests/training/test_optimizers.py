"""training.optimizers: each optimizer name builds its optimizer over the decay groups, an unknown one names
the known ones, and the learning rate scales linearly with the batch (the engine's and the scoring head's rule)."""

from __future__ import annotations

import pytest
import torch

from asr_pipeline.pron.scoring import ScoringOptions
from asr_pipeline.training.optimizers import batch_scaled_lr, build_optimizer, decay_groups
from asr_pipeline.training.scaled_adam import ScaledAdam


def tiny_model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("adamw", torch.optim.AdamW),
        ("adam", torch.optim.Adam),
        ("sgd", torch.optim.SGD),
        ("scaled_adam", ScaledAdam),
    ],
)
def test_each_optimizer_name_builds_its_optimizer_over_the_decay_groups(name, kind):
    optimizer = build_optimizer(name, tiny_model(), lr=0.01, weight_decay=0.1)
    assert type(optimizer) is kind
    # group 0 decays the matrices, group 1 (biases) does not: a schedule's decay finds group 0 either way
    assert [len(g["params"]) for g in optimizer.param_groups] == [2, 2]
    assert [g["weight_decay"] for g in optimizer.param_groups] == [0.1, 0.0]


def test_an_unknown_optimizer_names_the_known_ones():
    with pytest.raises(ValueError, match="adamw, adam, sgd, scaled_adam"):
        build_optimizer("lion", tiny_model(), lr=0.01, weight_decay=0.0)


@pytest.mark.parametrize(("batch", "lr"), [(8, 1e-3), (16, 2e-3), (4, 5e-4), (0, 0.0), (12, 1.5e-3)])
def test_batch_scaled_lr_is_linear_in_the_batch_size(batch, lr):
    assert batch_scaled_lr(1e-3, batch, 8) == pytest.approx(lr)


def test_the_scoring_head_uses_the_same_rule():
    options = ScoringOptions(learning_rate=1e-3, batch_size=24, reference_batch_size=8)
    assert options.peak_learning_rate == batch_scaled_lr(1e-3, 24, 8) == pytest.approx(3e-3)


def test_decay_groups_leave_biases_and_frozen_weights_out_of_the_decay():
    model = tiny_model()
    model[0].weight.requires_grad_(False)
    decayed, undecayed = decay_groups(model, 0.1)
    assert [tuple(p.shape) for p in decayed["params"]] == [(2, 8)]
    assert [tuple(p.shape) for p in undecayed["params"]] == [(8,), (2,)]
    assert (decayed["weight_decay"], undecayed["weight_decay"]) == (0.1, 0.0)
