"""Balancer and Whiten: constraints on a layer's activations that act only through the gradient (icefall
``zipformer/scaling.py``; Yao et al., 2023, "Zipformer", §3.6 "Activation constraints").

Both are the identity in the forward pass and have no parameters. In the backward pass they add a small
gradient that moves the activations towards a constraint when it is broken, and nothing when it holds:

- ``Balancer``: per channel, the mean / stddev of the activations (a stand-in for the proportion of positive
  values, ``min_positive``..``max_positive``) and their RMS (from the mean absolute value, ``min_abs``..
  ``max_abs``) must stay in range. The gradient of ``|m - clamp(m)| + |log(clamp(rms) / rms)|`` over the
  batch is rescaled per channel to RMS ``grad_scale`` and added in proportion to the magnitude of the
  incoming gradient, so it is always a small, relative nudge: dead or exploding channels are pushed back.
- ``Whiten``: the whitening metric of the channels' covariance C (``tr(C^2) / (tr(C)^2 / D)`` per group,
  1 when every eigenvalue is equal, up to D when one direction dominates) must stay below
  ``whitening_limit``; above it, the metric's gradient is added at ``grad_scale`` times the incoming
  gradient's norm. It keeps a few directions from taking over a layer's output.

Each applies at random, with probability ``prob`` per training forward (icefall does this so that not
every layer's constraint moves at once, and to save the backward's extra work); Whiten uses its higher
probability after a step where its limit was broken, its lower one after a step where it held. icefall
varies ``prob`` and the limits with the batch count (``ScheduledFloat``); here they are constants, the
values icefall starts from. The draws use torch's RNG, so a checkpointed run resumes with the same ones.
Statistics are taken over every frame of the batch, padding included, as icefall does (padded frames are
zeros in our Zipformer).

Dimension legend: ``x`` is (..., C) with the channels on ``channel_dim`` (Balancer) or last (Whiten).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def proportion_positive_to_mean(proportion: float) -> float:
    """The per-channel limit on mean / stddev that icefall derives from a proportion of positive values:
    erfinv(2p - 1), through its approximation 0.8139535143 * atanh(2p - 1). (A Gaussian positive with
    probability p has mean / stddev sqrt(2) erfinv(2p - 1); icefall's conversion, kept here, is that
    without the sqrt(2), so its limits are somewhat tighter than their names say.)"""
    x = 2.0 * proportion - 1.0
    eps = 1.0e-10  # p exactly 0 or 1: a large finite limit instead of a crash
    return 0.8139535143 * (math.log(1 + x + eps) - math.log(1 - x + eps)) / 2.0


def abs_to_rms(mean_abs: float) -> float:
    """A Gaussian's RMS from its mean absolute value: sqrt(pi / 2) times it."""
    return 1.25331413732 * mean_abs


def balancer_gradient(
    x: Tensor, channel_dim: int, min_mean: float, max_mean: float, min_rms: float, max_rms: float
) -> Tensor:
    """The gradient of the broken-limit loss of ``x``'s channel statistics (module docstring), unscaled."""
    with torch.enable_grad():
        x = x.detach().float().requires_grad_()
        dims = [d for d in range(x.dim()) if d != channel_dim]
        uncentered_var = (x**2).mean(dim=dims, keepdim=True)
        mean = x.mean(dim=dims, keepdim=True)
        stddev = (uncentered_var - mean * mean).clamp(min=1.0e-20).sqrt()
        rms = uncentered_var.clamp(min=1.0e-20).sqrt()
        m = mean / stddev
        m_loss = (m - m.clamp(min=min_mean, max=max_mean)).abs()
        # a log ratio, so a too-large RMS is corrected as strongly as a too-small one
        r_loss = (rms.clamp(min=min_rms, max=max_rms) / rms).log().abs()
        (m_loss + r_loss).sum().backward()
    assert x.grad is not None
    return x.grad


class _BalancerFunction(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx, x: Tensor, limits: tuple[float, float, float, float], grad_scale: float, channel_dim: int
    ):  # type: ignore[override]
        ctx.save_for_backward(x)
        ctx.limits, ctx.grad_scale, ctx.channel_dim = limits, grad_scale, channel_dim
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        (x,) = ctx.saved_tensors
        dims = [d for d in range(x.dim()) if d != ctx.channel_dim]
        loss_grad = balancer_gradient(x, ctx.channel_dim, *ctx.limits)
        rms = (loss_grad**2).mean(dim=dims, keepdim=True).sqrt().clamp(min=1.0e-20)
        loss_grad = loss_grad * (ctx.grad_scale / rms)  # per channel RMS grad_scale; 0 where nothing broke
        grad32 = grad.float()
        # scaled by |grad| element-wise: the incoming gradient's magnitude as the nudge's natural unit
        return (grad32 + grad32.abs() * loss_grad).to(grad.dtype), None, None, None


class Balancer(nn.Module):
    """Per-channel limits on the sign balance and the size of ``x``'s activations, enforced through the
    gradient (module docstring; icefall's Balancer, its defaults)."""

    def __init__(
        self,
        num_channels: int,
        channel_dim: int = -1,
        min_positive: float = 0.05,
        max_positive: float = 0.95,
        min_abs: float = 0.2,
        max_abs: float = 100.0,
        grad_scale: float = 0.04,
        prob: float = 0.25,
    ) -> None:
        super().__init__()
        if not (0.0 <= min_positive <= max_positive <= 1.0 and 0.0 <= min_abs <= max_abs and 0 <= prob <= 1):
            raise ValueError(
                f"Balancer needs 0 <= min_positive <= max_positive <= 1, 0 <= min_abs <= max_abs and prob in "
                f"[0, 1]; got positive {min_positive}..{max_positive}, abs {min_abs}..{max_abs}, prob {prob}"
            )
        self.num_channels, self.channel_dim, self.grad_scale, self.prob = (
            num_channels,
            channel_dim,
            grad_scale,
            prob,
        )
        self.limits = (
            proportion_positive_to_mean(min_positive),
            proportion_positive_to_mean(max_positive),
            abs_to_rms(min_abs),
            abs_to_rms(max_abs),
        )

    def forward(self, x: Tensor) -> Tensor:
        if not (self.training and x.requires_grad) or float(torch.rand(())) >= self.prob:
            return x
        channel_dim = self.channel_dim % x.dim()
        if x.size(channel_dim) != self.num_channels:
            raise ValueError(
                f"Balancer of {self.num_channels} channels got {x.size(channel_dim)} on dim {channel_dim}"
            )
        return _BalancerFunction.apply(x, self.limits, self.grad_scale, channel_dim)


def whitening_metric(x: Tensor, num_groups: int) -> Tensor:
    """tr(C^2) / (tr(C)^2 / D) of the centred covariance C of ``x``'s (..., D) channels in ``num_groups``
    groups (means over groups): 1 for white data, larger the more a few directions dominate (icefall's
    ``_whitening_metric``)."""
    x = x.reshape(-1, x.size(-1))  # (N, D)
    frames, channels = x.shape
    per_group = channels // num_groups
    x = x.reshape(frames, num_groups, per_group).transpose(0, 1)  # (G, N, D/G)
    x = x - x.mean(dim=1, keepdim=True)
    covariance = x.transpose(1, 2) @ x  # (G, D/G, D/G)
    mean_diagonal = covariance.diagonal(dim1=1, dim2=2).mean()
    mean_diagonal_of_square = (covariance**2).sum() / (num_groups * per_group)  # = mean diag of C @ C
    return mean_diagonal_of_square / (mean_diagonal**2 + 1.0e-20)


class _WhiteningPenalty(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, module: Whiten):  # type: ignore[override]
        ctx.save_for_backward(x)
        ctx.module = module
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        (x,) = ctx.saved_tensors
        whiten: Whiten = ctx.module
        with torch.enable_grad():
            detached = x.detach().float().requires_grad_()
            metric = whitening_metric(detached, whiten.num_groups)
            if float(metric.detach()) < whiten.whitening_limit:
                whiten.prob = whiten.min_prob
                return grad, None
            whiten.prob = whiten.max_prob
            metric.backward()
        assert detached.grad is not None
        penalty = detached.grad * (whiten.grad_scale * grad.float().norm() / (detached.grad.norm() + 1.0e-20))
        return grad + penalty.to(grad.dtype), None


class Whiten(nn.Module):
    """A limit on how far from white (equal covariance eigenvalues) ``x``'s (..., D) channels may get,
    enforced through the gradient (module docstring; icefall's Whiten)."""

    def __init__(
        self,
        num_groups: int = 1,
        whitening_limit: float = 4.0,
        prob: tuple[float, float] = (0.025, 0.25),
        grad_scale: float = 0.01,
    ) -> None:
        super().__init__()
        min_prob, max_prob = prob
        if num_groups < 1 or whitening_limit < 1.0 or grad_scale < 0 or not 0 < min_prob <= max_prob <= 1:
            raise ValueError(
                f"Whiten needs num_groups >= 1, whitening_limit >= 1, grad_scale >= 0 and 0 < min_prob <= "
                f"max_prob <= 1; got {num_groups}, {whitening_limit}, {grad_scale}, {prob}"
            )
        self.num_groups, self.whitening_limit, self.grad_scale = num_groups, whitening_limit, grad_scale
        self.min_prob, self.max_prob = min_prob, max_prob
        self.prob = max_prob  # until the first check says the limit holds

    def forward(self, x: Tensor) -> Tensor:
        if (
            not (self.training and x.requires_grad)
            or self.grad_scale == 0
            or float(torch.rand(())) >= self.prob
        ):
            return x
        if x.size(-1) % self.num_groups:
            raise ValueError(f"Whiten: {x.size(-1)} channels do not split into {self.num_groups} groups")
        return _WhiteningPenalty.apply(x, self)


__all__ = ["Balancer", "Whiten", "balancer_gradient", "proportion_positive_to_mean", "whitening_metric"]
