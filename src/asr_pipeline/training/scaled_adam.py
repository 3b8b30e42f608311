"""ScaledAdam: Adam whose update is relative to each parameter's size (Yao et al. 2023, "Zipformer: A faster
and better encoder for automatic speech recognition", section 3.4; icefall's ``zipformer/optim.py``).

For a tensor parameter ``p`` (more than one element) with root-mean-square ``r = rms(p)`` clamped to
``[param_min_rms, ...)``, gradient ``g`` and Adam's second moment ``v`` (bias-corrected)::

    delta <- beta1 * delta - lr * (1 - beta1) * r * g / (sqrt(v) + eps)        # the update, relative to r
                          + lr * scalar_lr_scale * (1 - beta1) * s * p           # the learned scale, below
    p     <- p + delta

so a parameter ten times larger moves ten times further per step, and ``lr`` reads as "the relative change
per step" (icefall's Zipformer recipe uses 0.045). Adam alone moves every parameter by about ``lr`` whatever
its size, which makes small parameters jumpy and large ones slow.

The scale ``s``: the parameter's size is learned explicitly, as if ``p = exp(log_scale) * direction``. The
gradient of the loss with respect to ``log_scale`` is ``sum(p * g)``; it is accumulated over
``size_update_period`` steps, normalised by its own Adam second moment, and applied as ``p * s`` with the rate
``lr * scalar_lr_scale``. The step is dropped when it would shrink a parameter already below
``param_min_rms`` and capped so that the RMS never passes ``param_max_rms``. ``r`` is re-measured on the same
period (measuring it every step costs a reduction per tensor per step for a number that moves slowly).

Scalars (one element) take a plain Adam step at ``lr * scalar_lr_scale`` and are kept in
``[-scalar_max, scalar_max]``.

Clipping: the gradient norm is measured in the update's own metric (each tensor's gradient times its RMS,
so it is the norm of the relative change Adam would make before normalisation); the threshold is
``clipping_scale`` times the median of the norms recorded over the last ``clipping_update_period`` steps,
re-estimated every period (and at steps 10, 20, 40, so a run clips before its first period ends). A step
whose norm is above the threshold has its gradients scaled down to it. Until the first estimate nothing is
clipped. (Differences from icefall, on purpose: the median is of the norms recorded so far, not of a
zero-padded buffer; parameters are stepped one by one rather than batched by shape.)

The first moment is not bias-corrected (as in icefall): the learning-rate warmup (Eden's, from 0.5) covers
the first steps. There is no weight decay: the clamp to ``param_max_rms`` bounds the parameters instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor

IRREGULAR_ESTIMATE_STEPS = (10, 20, 40)  # early threshold estimates, before the first full period


class ScaledAdam(torch.optim.Optimizer):
    """ScaledAdam (see the module docstring). ``lr`` is the relative change per step; a param group's
    ``weight_decay`` (from ``training.optimization.decay_groups``) is accepted and ignored."""

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float = 0.045,
        *,
        clipping_scale: float | None = 2.0,
        betas: tuple[float, float] = (0.9, 0.98),
        scalar_lr_scale: float = 0.1,
        eps: float = 1e-8,
        param_min_rms: float = 1e-5,
        param_max_rms: float = 3.0,
        scalar_max: float = 10.0,
        size_update_period: int = 4,
        clipping_update_period: int = 100,
    ) -> None:
        if lr <= 0:
            raise ValueError(f"ScaledAdam: lr must be > 0, got {lr}")
        if not 0.0 <= betas[0] < 1.0 or not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"ScaledAdam: betas must be in [0, 1), got {betas}")
        if not 0.0 < param_min_rms < param_max_rms:
            raise ValueError(
                f"ScaledAdam: need 0 < param_min_rms < param_max_rms, got {param_min_rms}, {param_max_rms}"
            )
        if clipping_scale is not None and clipping_scale <= 0:
            raise ValueError(
                f"ScaledAdam: clipping_scale must be > 0 or None (no clipping), got {clipping_scale}"
            )
        if size_update_period < 1 or clipping_update_period < 1:
            raise ValueError("ScaledAdam: size_update_period and clipping_update_period must be >= 1")
        defaults = {
            "lr": lr,
            "clipping_scale": clipping_scale,
            "betas": betas,
            "scalar_lr_scale": scalar_lr_scale,
            "eps": eps,
            "param_min_rms": param_min_rms,
            "param_max_rms": param_max_rms,
            "scalar_max": scalar_max,
            "size_update_period": size_update_period,
            "clipping_update_period": clipping_update_period,
        }
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            for p in params:
                if p.grad.is_sparse:
                    raise RuntimeError("ScaledAdam does not take sparse gradients")
                if not self.state[p]:
                    self._init_state(group, p)
            factor = self._clipping_factor(group, params)
            for p in params:
                grad = p.grad if factor == 1.0 else p.grad * factor
                self._step_one(group, p, grad)
        return loss

    def _init_state(self, group: dict[str, Any], p: Tensor) -> None:
        state = self.state[p]
        state["step"] = 0
        state["delta"] = torch.zeros_like(p)  # the momentum of the update itself
        state["exp_avg_sq"] = torch.zeros_like(p)
        if p.numel() > 1:
            state["param_rms"] = _rms(p).clamp(min=group["param_min_rms"])
            state["scale_grads"] = torch.zeros(group["size_update_period"], dtype=p.dtype, device=p.device)
            state["scale_exp_avg_sq"] = torch.zeros((), dtype=p.dtype, device=p.device)

    def _clipping_factor(self, group: dict[str, Any], params: list[Tensor]) -> float:
        """The factor (<= 1) this step's gradients are multiplied by; the norm history lives in the state of
        the group's first parameter, so it travels in ``state_dict``."""
        scale = group["clipping_scale"]
        first = self.state[params[0]]
        step = first["step"]
        if scale is None:
            return 1.0
        sumsq = torch.zeros((), dtype=torch.float64, device=params[0].device)
        for p in params:
            state = self.state[p]
            relative = p.grad if p.numel() == 1 else p.grad * state["param_rms"]
            sumsq += relative.double().pow(2).sum()
        norm = float(sumsq.sqrt())
        period = group["clipping_update_period"]
        if "model_norms" not in first:
            first["model_norms"] = torch.full((period,), float("nan"), dtype=torch.float64)
            first["num_clipped"] = 0
        norms = first["model_norms"]
        norms[step % period] = norm
        if step > 0 and (step % period == 0 or step in IRREGULAR_ESTIMATE_STEPS):
            recorded = norms[~torch.isnan(norms)]
            first["model_norm_threshold"] = scale * float(recorded.median())
        threshold = first.get("model_norm_threshold")
        if threshold is None or not norm > threshold:
            return 1.0
        first["num_clipped"] += 1
        return threshold / norm

    def _step_one(self, group: dict[str, Any], p: Tensor, grad: Tensor) -> None:
        state = self.state[p]
        beta1, _ = group["betas"]
        delta = state["delta"]
        delta.mul_(beta1)
        if p.numel() == 1:
            self._scalar_step(group, p, grad, state)
        else:
            step, period = state["step"], group["size_update_period"]
            state["scale_grads"][step % period] = (p * grad).sum()  # d loss / d log(scale)
            if step % period == period - 1:
                # The scale step reads the RMS of the period's start, then the RMS is re-measured.
                self._scale_step(group, p, state)
                state["param_rms"].copy_(_rms(p).clamp(min=group["param_min_rms"]))
            self._tensor_step(group, grad, state)
        p.add_(delta)
        state["step"] += 1

    def _scale_step(self, group: dict[str, Any], p: Tensor, state: dict[str, Any]) -> None:
        """Add this period's learned change of ``p``'s size to ``delta``: ``p * s``, ``s`` a relative step."""
        beta1, beta2 = group["betas"]
        scale_grads = state["scale_grads"]
        period = scale_grads.numel()
        beta2_period = beta2**period  # one moment update per period: the same memory in steps
        exp_avg_sq = state["scale_exp_avg_sq"]
        exp_avg_sq.mul_(beta2_period).add_(scale_grads.pow(2).mean(), alpha=1 - beta2_period)
        updates = (state["step"] + 1) // period
        bias_correction2 = 1 - beta2_period**updates
        denom = (exp_avg_sq / bias_correction2).sqrt() + group["eps"]
        size_lr = group["lr"] * group["scalar_lr_scale"]
        scale_step = -size_lr * scale_grads.sum() / denom
        rms = _rms(p)
        if rms < group["param_min_rms"]:  # too small already: never shrink further
            scale_step = scale_step.clamp(min=0.0)
        # Never past param_max_rms: the step that would land exactly on it, at most.
        scale_step = torch.minimum(scale_step, (group["param_max_rms"] - rms) / rms.clamp(min=1e-20))
        state["delta"].add_(p * scale_step, alpha=1 - beta1)

    def _tensor_step(self, group: dict[str, Any], grad: Tensor, state: dict[str, Any]) -> None:
        beta1, beta2 = group["betas"]
        exp_avg_sq = state["exp_avg_sq"]
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        bias_correction2 = 1 - beta2 ** (state["step"] + 1)
        denom = (exp_avg_sq / bias_correction2).sqrt().add_(group["eps"])
        alpha = -group["lr"] * (1 - beta1) * state["param_rms"]  # the update relative to the size
        state["delta"].add_(grad / denom * alpha)

    def _scalar_step(self, group: dict[str, Any], p: Tensor, grad: Tensor, state: dict[str, Any]) -> None:
        beta1, beta2 = group["betas"]
        exp_avg_sq = state["exp_avg_sq"]
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        bias_correction2 = 1 - beta2 ** (state["step"] + 1)
        denom = (exp_avg_sq / bias_correction2).sqrt().add_(group["eps"])
        lr = group["lr"] * group["scalar_lr_scale"]
        state["delta"].add_(grad / denom, alpha=-lr * (1 - beta1))
        p.clamp_(min=-group["scalar_max"], max=group["scalar_max"])

    def num_clipped(self) -> int:
        """Steps whose gradients were clipped so far (summed over groups)."""
        total = 0
        for group in self.param_groups:
            for p in group["params"]:
                total += self.state[p].get("num_clipped", 0) if p in self.state else 0
        return total


def _rms(p: Tensor) -> Tensor:
    return p.detach().pow(2).mean().sqrt()


__all__ = ["ScaledAdam"]
