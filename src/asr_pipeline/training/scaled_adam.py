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
clipped. Each param group clips by its own norm, as icefall's does. (A difference from icefall, on purpose: the
median is of the norms recorded so far, not of a zero-padded buffer.)

The step is a few multi-tensor (``torch._foreach_*``) calls over the tensors that share a device, a dtype and
a step count, not a loop over the tensors: on a GPU each op of a Python loop is a kernel launch, and the
per-tensor loop dispatched ~14,000 ops a step for Zipformer-M's 717 tensors
(``benchmarks/bench_optimizer_step.py``). Nothing is read back to the host but each tensor's RMS and
scale step, once per ``size_update_period``: the clipping norm, its median and the factor stay on the
device. Each tensor's ``sum(p * g)`` is one segmented reduction on CUDA (a launch, not one per tensor); on
the CPU a flat copy of the products costs more than the per-tensor sums it saves. The gradients (their
flat copy, below, when told a verdict) are scaled in place when clipped.

A step whose gradients are not finite is skipped. On a GPU the trainer does not read that verdict back
(the CPU would wait for the whole backward before queueing the update): it tells the optimizer as a
tensor, ``found_inf`` (1.0: skip), the way ``GradScaler`` tells torch's fused optimizers
(``_step_supports_amp_scaling``), and the step skips on the device. The gradients are copied into one
flat buffer and zeroed there when skipping (a multiply would turn an infinity into NaN); the momentum,
the second moment and the parameter update are multiplied by 0-d factors that leave them unchanged then,
and the scalars' clamp, the clipping norm's record and its threshold's estimate are chosen on the device:
a skipped step changes no parameter or state tensor. What it does advance is the step count (the host
counts calls: its periods and bias corrections cannot wait for the verdict), so the second moment's bias
correction after k skipped calls is Adam's after k more steps; a skipped call that ends a size period
applies no scale step, and that period's sums run on into the next. The trainer tells ScaledAdam on CUDA,
except under f16, whose loss scaler skips routinely (its first steps, each growth interval). On the
CPU, where reading a value waits for nothing, it reads the verdict and calls ``step`` only for updates
taken (``device_skip`` forces either way).

The first moment is not bias-corrected (as in icefall): the learning-rate warmup (Eden's, from 0.5) covers
the first steps. There is no weight decay: the clamp to ``param_max_rms`` bounds the parameters instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Iterable
from typing import Any

import torch
from torch import Tensor

IRREGULAR_ESTIMATE_STEPS = (10, 20, 40)  # early threshold estimates, before the first full period
# The state kept in float64 whatever the parameters' dtype: the clipping norms and their threshold.
FLOAT64_STATE = ("model_norms", "model_norm_threshold")


class ScaledAdam(torch.optim.Optimizer):
    """ScaledAdam (see the module docstring). ``lr`` is the relative change per step; a param group's
    ``weight_decay`` (from ``training.optimization.decay_groups``) is accepted and ignored.
    ``segmented_sums``: each tensor's ``sum(p * g)`` from one segmented reduction (True) or tensor by
    tensor (False); None, the default: segmented on CUDA only, in float32 and float64. ``device_skip``:
    whether the step takes a skip verdict as a tensor (``found_inf``, see the module docstring); None, the
    default: on CUDA only, in float32 and float64."""

    segmented_sums: bool | None = None
    device_skip: bool | None = None

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
        self._segments: dict[tuple[torch.device, torch.dtype], _Segments] = {}
        self._gradients: dict[tuple[torch.device, torch.dtype], _Flat] = {}

    def __setstate__(self, state: dict[str, Any]) -> None:  # a copy or an unpickled one: torch keeps only
        super().__setstate__(state)  # the defaults, the state and the groups
        self._segments, self._gradients = {}, {}

    @property
    def _step_supports_amp_scaling(self) -> bool:  # torch's name: GradScaler and the trainer read it
        """Whether ``step`` takes the skip verdict as a tensor: ``device_skip``, by default on CUDA with
        float32 or float64 parameters (its 0-d decays are in the parameters' dtype)."""
        if self.device_skip is not None:
            return self.device_skip
        first = next((p for group in self.param_groups for p in group["params"]), None)
        return first is not None and _cuda_wide_float(first)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        # Set by the trainer or GradScaler when _step_supports_amp_scaling: 1.0 skips; the gradients' scale.
        found_inf, grad_scale = getattr(self, "found_inf", None), getattr(self, "grad_scale", None)
        skip = None if found_inf is None else found_inf != 0  # (,) bool, on the parameters' device
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            if any(p.grad.is_sparse for p in params):
                raise RuntimeError("ScaledAdam does not take sparse gradients")
            self._init_states(group, [p for p in params if not self.state[p]])
            grads = self._sanitized(params, skip, grad_scale)
            factor = self._clipping_factor(group, params, grads, skip)
            batches = _grouped(params, lambda p: (p.device, p.dtype, self.state[p]["step"]))
            for (_, _, step), batch in batches.items():
                self._step_batch(group, batch, [grads[p] for p in batch], step, factor, skip)
        return loss

    def _sanitized(
        self, params: list[Tensor], skip: Tensor | None, grad_scale: Tensor | None
    ) -> dict[Tensor, Tensor]:
        """Each parameter's gradient to step with: its own, or, told a verdict (or a scale), a view of one
        flat copy per device and dtype, unscaled and zeroed there when ``skip`` is set."""
        if skip is None and grad_scale is None:
            return {p: p.grad for p in params}
        grads = {}
        for same in _by_device_and_dtype(params):
            key = (same[0].device, same[0].dtype)
            layout = self._gradients.setdefault(key, _Flat()).layout(same)
            torch._foreach_copy_(layout.views, [p.grad for p in same])
            if grad_scale is not None:  # as GradScaler unscales: by the reciprocal in float32
                layout.flat.mul_(grad_scale.to(key[0]).double().reciprocal().float())
            if skip is not None:
                layout.flat.masked_fill_(skip.to(key[0]), 0.0)
            grads.update(zip(same, layout.views, strict=True))
        return grads

    def _init_states(self, group: dict[str, Any], params: list[Tensor]) -> None:
        for same in _by_device_and_dtype([p for p in params if p.numel() > 1]):
            for p, rms in zip(same, torch.stack(_rms(same)).tolist(), strict=True):  # one read
                self.state[p]["param_rms"] = max(rms, group["param_min_rms"])
                for key in ("scale_grad_sum", "scale_grad_sq_sum", "scale_exp_avg_sq"):
                    self.state[p][key] = torch.zeros((), dtype=p.dtype, device=p.device)
        for p in params:
            state = self.state[p]
            state["step"] = 0
            state["delta"] = torch.zeros_like(p)  # the momentum of the update itself
            state["exp_avg_sq"] = torch.zeros_like(p)

    def _clipping_factor(
        self, group: dict[str, Any], params: list[Tensor], grads: dict[Tensor, Tensor], skip: Tensor | None
    ) -> Tensor | None:
        """The factor (<= 1, a 0-d tensor on the device) this step's gradients are multiplied by, None when
        the group does not clip. The norm history lives in the state of the group's first parameter, so it
        travels in ``state_dict``; a skipped step leaves it as it was."""
        scale = group["clipping_scale"]
        if scale is None:
            return None
        first = self.state[params[0]]
        device = params[0].device
        squares = []
        for same in _by_device_and_dtype(params):
            norms = torch._foreach_norm([grads[p] for p in same], 2, dtype=torch.float64)
            # In the update's metric: each gradient times its tensor's RMS (a scalar's own: 1).
            torch._foreach_mul_(norms, [self.state[p]["param_rms"] if p.numel() > 1 else 1.0 for p in same])
            squares.append(torch.stack(norms).square().sum().to(device))
        norm = torch.stack(squares).sum().sqrt()
        period = group["clipping_update_period"]
        if "model_norms" not in first:
            first["model_norms"] = torch.full((period,), float("nan"), dtype=torch.float64, device=device)
            first["model_norm_threshold"] = torch.full((), float("inf"), dtype=torch.float64, device=device)
            first["num_clipped"] = torch.zeros((), dtype=torch.int64, device=device)
        norms = first["model_norms"]
        step = first["step"]
        slot = step % period
        norms[slot] = norm if skip is None else _held(skip, norms[slot], norm)  # no read of the slot else
        threshold = first["model_norm_threshold"]
        if step > 0 and (step % period == 0 or step in IRREGULAR_ESTIMATE_STEPS):
            estimate = scale * norms.nanmedian()  # of the norms recorded so far
            threshold = _held(skip, threshold, estimate)
            first["model_norm_threshold"] = threshold
        clipped = norm > threshold
        first["num_clipped"] += clipped
        return torch.where(clipped, threshold / norm, 1.0)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """torch's, then a checkpoint of the per-tensor optimizer (before the multi-tensor step) brought to
        this one's state: the RMS a float, the period's sums accumulated, the clipping history on the
        device. torch casts every floating state tensor to its parameter's dtype; the clipping history is
        float64, so it is taken from the checkpoint as it was saved, not back from the cast."""
        saved = (
            state_dict.get("state", {}).get(pid, {})  # a malformed checkpoint: torch's load below says so
            for group in state_dict.get("param_groups", ())
            for pid in group["params"]
        )
        ours = (p for group in self.param_groups for p in group["params"])
        history = {
            p: {key: state[key] for key in FLOAT64_STATE if key in state}
            for state, p in zip(saved, ours, strict=False)  # a mismatch too
        }
        super().load_state_dict(state_dict)
        for group in self.param_groups:
            for p in group["params"]:
                if self.state.get(p):
                    self.state[p].update(history[p])
                    _upgrade_state(self.state[p], group["size_update_period"], p.device)

    def _step_batch(
        self,
        group: dict[str, Any],
        params: list[Tensor],
        grads: list[Tensor],
        step: int,
        factor: Tensor | None,
        skip: Tensor | None,
    ) -> None:
        """One step of tensors that share a device, a dtype and a step count. ``skip`` (0-d bool on the
        device, or None): the gradients are zero when it is set, and the decays below are 1."""
        beta1, beta2 = group["betas"]
        states = [self.state[p] for p in params]
        if factor is not None:
            torch._foreach_mul_(grads, factor.to(params[0].device, params[0].dtype))
        deltas = [state["delta"] for state in states]
        torch._foreach_mul_(deltas, _unless(skip, beta1, params[0]))
        tensors = [i for i, p in enumerate(params) if p.numel() > 1]
        if tensors:
            self._sizes(group, [params[i] for i in tensors], [grads[i] for i in tensors], step, skip)
        # Adam's second moment and the update, relative to each tensor's RMS; scalars at the scalar rate.
        exp_avg_sqs = [state["exp_avg_sq"] for state in states]
        torch._foreach_mul_(exp_avg_sqs, _unless(skip, beta2, params[0]))
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1 - beta2)
        denoms = torch._foreach_div(exp_avg_sqs, 1 - beta2 ** (step + 1))
        torch._foreach_sqrt_(denoms)
        torch._foreach_add_(denoms, group["eps"])
        scalar_rate = -group["lr"] * group["scalar_lr_scale"] * (1 - beta1)
        rates = [scalar_rate] * len(params)
        for i in tensors:
            rates[i] = -group["lr"] * (1 - beta1) * self.state[params[i]]["param_rms"]
        torch._foreach_addcdiv_(deltas, grads, denoms, rates)
        scalars = [p for p in params if p.numel() == 1]
        if scalars and skip is None:
            torch._foreach_clamp_min_(scalars, -group["scalar_max"])
            torch._foreach_clamp_max_(scalars, group["scalar_max"])
        elif scalars:  # clamped together, and held as they are on a skip
            shaped = [scalar if scalar.dim() == 0 else scalar.reshape(()) for scalar in scalars]  # views
            values = torch.stack(shaped)
            values = _held(skip, values, values.clamp(-group["scalar_max"], group["scalar_max"]))
            torch._foreach_copy_(shaped, list(values.unbind(0)))
        if skip is None:
            torch._foreach_add_(params, deltas)
        else:  # the momentum moves nothing on a skipped step: times 0
            torch._foreach_add_(params, torch._foreach_mul(deltas, _unless(skip, 1.0, params[0], 0.0)))
        for state in states:
            state["step"] += 1

    def _sizes(
        self, group: dict[str, Any], params: list[Tensor], grads: list[Tensor], step: int, skip: Tensor | None
    ) -> None:
        """Accumulate each tensor's ``sum(p * g)`` (d loss / d log(scale)) and its square; at a period's
        end, add the learned change of each tensor's size to its ``delta`` (``p * s``, ``s`` a relative
        step) and re-measure its RMS. The scale step reads the RMS of the period's start; the update after it
        the new one. A skipped step (its gradients zero, its sums too) that ends a period reads the verdict
        with the sizes, and the period's sums run on."""
        states = [self.state[p] for p in params]
        period = group["size_update_period"]
        sums = self._sums_of_products(params, grads)
        grad_sums = [state["scale_grad_sum"] for state in states]
        grad_sq_sums = [state["scale_grad_sq_sum"] for state in states]
        torch._foreach_add_(grad_sums, sums)
        torch._foreach_addcmul_(grad_sq_sums, sums, sums)
        if step % period != period - 1:
            return
        beta1, beta2 = group["betas"]
        grad_sum, grad_sq_sum = torch.stack(grad_sums), torch.stack(grad_sq_sums)
        beta2_period = beta2**period  # one moment update per period: the same memory in steps
        exp_avg_sq = torch.stack([state["scale_exp_avg_sq"] for state in states])
        exp_avg_sq = exp_avg_sq * beta2_period + grad_sq_sum / period * (1 - beta2_period)
        bias_correction2 = 1 - beta2_period ** ((step + 1) // period)
        denom = (exp_avg_sq / bias_correction2).sqrt() + group["eps"]
        scale_step = -group["lr"] * group["scalar_lr_scale"] * grad_sum / denom
        rms = torch.stack(_rms(params))
        # Too small already: never shrink further; never past param_max_rms (the step landing on it, at most).
        scale_step = torch.where(rms < group["param_min_rms"], scale_step.clamp(min=0.0), scale_step)
        scale_step = torch.minimum(scale_step, (group["param_max_rms"] - rms) / rms.clamp(min=1e-20))
        rows = [scale_step, rms] + ([] if skip is None else [skip.to(rms.dtype).expand_as(rms)])
        steps, measured, *skipped = torch.stack(rows).tolist()  # the one read of a period
        if skipped and skipped[0][0]:
            return
        torch._foreach_zero_(grad_sums + grad_sq_sums)
        torch._foreach_copy_([state["scale_exp_avg_sq"] for state in states], exp_avg_sq.unbind(0))
        torch._foreach_add_(
            [state["delta"] for state in states],
            torch._foreach_mul(params, [(1 - beta1) * s for s in steps]),
        )
        for state, value in zip(states, measured, strict=True):
            state["param_rms"] = max(value, group["param_min_rms"])

    def _sums_of_products(self, params: list[Tensor], grads: list[Tensor]) -> list[Tensor]:
        """Each tensor's ``sum(p * g)``, 0-d tensors."""
        segmented = self.segmented_sums
        if segmented is None:  # bf16/f16 would add up in their own precision
            segmented = _cuda_wide_float(params[0])
        if not segmented:
            return [product.sum() for product in torch._foreach_mul(params, grads)]
        key = (params[0].device, params[0].dtype)
        return self._segments.setdefault(key, _Segments()).sums_of_products(params, grads)

    def num_clipped(self) -> int:
        """Steps whose gradients were clipped so far (summed over groups)."""
        total = 0
        for group in self.param_groups:
            for p in group["params"]:
                total += int(self.state[p].get("num_clipped", 0)) if p in self.state else 0
        return total


def _upgrade_state(state: dict[str, Any], size_update_period: int, device: torch.device) -> None:
    """One parameter's loaded state as the step keeps it (see ``ScaledAdam.load_state_dict``)."""
    if isinstance(state.get("param_rms"), Tensor):
        state["param_rms"] = float(state["param_rms"])
    if "scale_grads" in state:  # one entry a step; those of the current period are the first step % period
        recorded = state.pop("scale_grads")[: state["step"] % size_update_period]
        state["scale_grad_sum"], state["scale_grad_sq_sum"] = recorded.sum(), recorded.square().sum()
    if "model_norms" in state:  # the group's first parameter: the threshold absent before its first estimate
        # Copies: the step updates them in place, and they may be the caller's checkpoint tensors.
        state["model_norms"] = state["model_norms"].to(device=device, dtype=torch.float64, copy=True)
        threshold = state.get("model_norm_threshold", float("inf"))
        state["model_norm_threshold"] = torch.tensor(float(threshold), dtype=torch.float64, device=device)
        state["num_clipped"] = torch.as_tensor(state["num_clipped"], dtype=torch.int64, device=device)


@dataclasses.dataclass
class _Layout:
    """Views into a ``_Flat`` buffer shaped as one list of tensors, the flat run they cover, and (for
    ``_Segments``) their lengths on the device, made once."""

    views: list[Tensor]
    flat: Tensor
    lengths: Tensor | None = None


class _Flat:
    """Tensors' shapes laid end to end in one flat buffer per device and dtype: each layout (which tensors,
    in which shapes) keeps its views into it, at most ``LAYOUTS`` of them (layer drop leaves other tensors
    without gradients from step to step). The buffer costs the memory of the largest layout once."""

    LAYOUTS = 8

    def __init__(self) -> None:
        self.flat: Tensor | None = None
        self.layouts: dict[tuple[torch.Size, ...], _Layout] = {}

    def layout(self, like: list[Tensor]) -> _Layout:
        """The layout of ``like``'s tensors (which share a device and a dtype)."""
        shapes = tuple(t.shape for t in like)
        if shapes not in self.layouts:
            sizes = [t.numel() for t in like]
            total = sum(sizes)
            if self.flat is None or self.flat.numel() < total or len(self.layouts) >= self.LAYOUTS:
                self.flat = torch.empty(total, dtype=like[0].dtype, device=like[0].device)
                self.layouts.clear()
            views = [view.view_as(t) for view, t in zip(self.flat[:total].split(sizes), like, strict=True)]
            self.layouts[shapes] = _Layout(views, self.flat[:total])
        return self.layouts[shapes]


class _Segments(_Flat):
    """Each tensor's ``sum(p * g)`` as one segmented reduction over the products laid end to end in its flat
    buffer, with no op a tensor (on CUDA: a few launches, where a sum a tensor is one each)."""

    def sums_of_products(self, params: list[Tensor], grads: list[Tensor]) -> list[Tensor]:
        layout = self.layout(params)
        if layout.lengths is None:
            layout.lengths = torch.tensor([p.numel() for p in params], device=params[0].device)
        torch._foreach_copy_(layout.views, params)
        torch._foreach_mul_(layout.views, grads)
        # unsafe: the lengths are ours and sum to the buffer's size; checking them reads them back.
        sums = torch.segment_reduce(layout.flat, "sum", lengths=layout.lengths, unsafe=True)
        return list(sums.unbind(0))


def _grouped(params: list[Tensor], key: Callable[[Tensor], Hashable]) -> dict[Hashable, list[Tensor]]:
    groups: dict[Hashable, list[Tensor]] = {}
    for p in params:
        groups.setdefault(key(p), []).append(p)
    return groups


def _by_device_and_dtype(params: list[Tensor]) -> list[list[Tensor]]:
    return list(_grouped(params, lambda p: (p.device, p.dtype)).values())


def _held(skip: Tensor | None, old: Tensor, new: Tensor) -> Tensor:
    """``new``, or ``old`` where the skip verdict says skip (chosen on the device)."""
    return new if skip is None else torch.where(skip, old, new)


def _cuda_wide_float(p: Tensor) -> bool:
    """Whether ``p`` takes CUDA's ways by default (the segmented sums, the skip on the device): on CUDA, in
    float32 or float64."""
    return p.is_cuda and p.dtype in (torch.float32, torch.float64)


def _unless(skip: Tensor | None, value: float, like: Tensor, skipped: float = 1.0) -> float | Tensor:
    """``value``, or, told a skip verdict, a 0-d tensor in ``like``'s dtype and device that is ``skipped``
    when it says skip (a foreach multiply takes a 0-d tensor of its own dtype in one launch)."""
    if skip is None:
        return value
    return torch.full((), value, dtype=like.dtype, device=like.device).masked_fill_(skip, skipped)


def _rms(params: list[Tensor]) -> list[Tensor]:
    """Each tensor's root-mean-square, 0-d tensors; ``params`` share a device and a dtype."""
    norms = torch._foreach_norm(params)
    torch._foreach_div_(norms, [p.numel() ** 0.5 for p in params])
    return list(norms)


__all__ = ["ScaledAdam"]
