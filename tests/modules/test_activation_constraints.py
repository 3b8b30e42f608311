"""modules.activation_constraints: Balancer and Whiten are the identity forwards; backwards they add a
gradient that moves a channel (or the covariance) whose statistics break the limit back towards it, and
exactly nothing when the statistics are within limits."""

from __future__ import annotations

import math

import pytest
import torch
from torch import Tensor

from asr_pipeline.modules.activation_constraints import (
    Balancer,
    Whiten,
    proportion_positive_to_mean,
    whitening_metric,
)


def within_limits(frames: int = 400, channels: int = 3, seed: int = 0) -> Tensor:
    """(N, C) standard normal: half positive, mean |x| ~0.8, nearly white."""
    return torch.randn(frames, channels, generator=torch.Generator().manual_seed(seed))


def added_gradient(module: torch.nn.Module, x: Tensor, seed: int = 1) -> Tensor:
    """What ``module``'s backward adds to a random incoming gradient g: x.grad - g."""
    x = x.clone().requires_grad_()
    g = torch.randn(x.shape, generator=torch.Generator().manual_seed(seed))
    y = module(x)
    assert torch.equal(y, x), "the forward is the identity"
    (y * g).sum().backward()
    assert x.grad is not None
    return x.grad - g


def mean_over_std(x: Tensor) -> Tensor:
    return x.mean(0) / x.std(0, correction=0)  # (C,)


def test_a_proportion_of_positives_maps_to_icefalls_mean_over_stddev_limit():
    assert proportion_positive_to_mean(0.5) == pytest.approx(0.0, abs=1e-9)
    assert proportion_positive_to_mean(0.95) == pytest.approx(-proportion_positive_to_mean(0.05))
    # erfinv(0.9) = 1.163; icefall's atanh approximation of it is within 5 %
    assert proportion_positive_to_mean(0.95) == pytest.approx(
        float(torch.erfinv(torch.tensor(0.9))), rel=0.05
    )


def test_the_balancer_adds_nothing_when_every_channel_is_within_its_limits():
    balancer = Balancer(3, prob=1.0)

    assert torch.equal(added_gradient(balancer, within_limits()), torch.zeros(400, 3))


def test_the_balancer_pushes_a_mostly_positive_channel_back_towards_balance_and_leaves_the_others():
    x = within_limits()
    x[:, 1] += 3.0  # channel 1 is positive ~99.9 % of the time, above max_positive = 0.95
    balancer = Balancer(3, prob=1.0)

    added = added_gradient(balancer, x)
    stepped = x - 10.0 * added  # a gradient-descent step on the added term alone

    assert torch.equal(added[:, [0, 2]], torch.zeros(400, 2))
    assert mean_over_std(stepped)[1] < mean_over_std(x)[1]


def test_the_balancer_grows_a_channel_too_small_to_matter_and_shrinks_one_too_large():
    x = within_limits()
    x[:, 0] *= 0.01  # rms 0.01 < min_abs 0.2 (rms 0.25)
    x[:, 2] *= 500.0  # rms 500 > max_abs 100 (rms 125)
    balancer = Balancer(3, prob=1.0)

    added = added_gradient(balancer, x)
    stepped = x - 1.0 * added

    rms = x.pow(2).mean(0).sqrt()
    stepped_rms = stepped.pow(2).mean(0).sqrt()
    assert stepped_rms[0] > rms[0] and stepped_rms[2] < rms[2]
    assert torch.equal(added[:, 1], torch.zeros(400))


def test_the_constraints_do_nothing_in_eval_mode_or_with_probability_zero():
    x = within_limits()
    x[:, 1] += 3.0
    evaluating = Balancer(3, prob=1.0).eval()

    assert torch.equal(added_gradient(evaluating, x), torch.zeros(400, 3))
    assert torch.equal(added_gradient(Balancer(3, prob=0.0), x), torch.zeros(400, 3))


def test_the_whitening_metric_is_one_for_white_data_and_the_width_for_one_direction():
    # rank one: C = v v^T, tr(C^2) = |v|^4 and tr(C)^2 / D = |v|^4 / D, so the metric is D
    direction = torch.randn(400, 1, generator=torch.Generator().manual_seed(3))
    assert float(whitening_metric(direction * torch.tensor([1.0, -2.0, 0.5, 3.0]), 1)) == pytest.approx(4.0)
    # white: every eigenvalue ~N; the sampling noise adds about D / N
    assert float(whitening_metric(within_limits(20000, 4), 1)) == pytest.approx(1.0, abs=0.01)


def test_whiten_adds_nothing_below_its_limit_and_whitens_a_dominated_output_above_it():
    white = within_limits(2000, 4)
    assert torch.equal(added_gradient(Whiten(1, 2.0, (1.0, 1.0), 0.1), white), torch.zeros(2000, 4))

    shared = torch.randn(2000, 1, generator=torch.Generator().manual_seed(4))
    dominated = shared + 0.3 * white  # one direction dominates: metric ~3.6 of at most 4
    whiten = Whiten(1, 2.0, (0.5, 1.0), 0.1)
    added = added_gradient(whiten, dominated)
    stepped = dominated - 100.0 * added

    assert float(whitening_metric(stepped, 1)) < float(whitening_metric(dominated, 1))
    g = torch.randn(dominated.shape, generator=torch.Generator().manual_seed(1))
    assert float(added.norm()) == pytest.approx(0.1 * float(g.norm()), rel=1e-4)  # grad_scale x |g|
    assert whiten.prob == 1.0  # the limit was broken: its higher probability from now on


def test_refused_settings_name_the_limits():
    with pytest.raises(ValueError, match="min_positive <= max_positive"):
        Balancer(4, min_positive=0.9, max_positive=0.1)
    with pytest.raises(ValueError, match="whitening_limit >= 1"):
        Whiten(1, 0.5)
    assert math.isfinite(proportion_positive_to_mean(1.0))
